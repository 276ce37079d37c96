// Package nodefeaturerule: the types NFD v0.19 hands a rule's template
// (pkg/apis/nfd/nodefeaturerule: rule.go's matchedFeatures and domainMatchedFeatures,
// expression.go's MatchedElement), with the data the tests use (tests/fixtures/sprig/classes.tsv,
// rules::template::tests::data).
package nodefeaturerule

type MatchedElement map[string]string

type matchedFeatures map[string]domainMatchedFeatures

type domainMatchedFeatures map[string][]MatchedElement

// Data is the matched features of the tests: two PCI devices and a kernel version attribute.
func Data() interface{} {
	return matchedFeatures{
		"pci": domainMatchedFeatures{"device": []MatchedElement{
			{"class": "0300", "vendor": "8086", "device": "9a49"},
			{"class": "0380", "vendor": "8086", "device": "56c0"},
		}},
		"kernel": domainMatchedFeatures{"version": []MatchedElement{{"Name": "major", "Value": "6"}}},
	}
}
