// oracle: Go's text/template with Sprig's function map, as NFD v0.19 runs a rule's template
// (template.NewHelper: Option("missingkey=error"); NFD's function map is Sprig's less env,
// expandenv and getHostByName), for tests/sprig_oracle.rs.
//
// Reads one JSON array per line, [data, template]: data "nil" (the template runs on nil) or
// "nfd" (NFD's matched features, typed as NFD types them: nodefeaturerule.go). Writes one JSON
// string per line, in the form of tests/fixtures/sprig/*.tsv: the output, or "ERROR: " and the
// message less Go's "template: :L:C: executing ... at <...>: " (or "template: :L: ") prefix.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"text/template"

	"github.com/Masterminds/sprig/v3"

	"oracle/nodefeaturerule"
)

var (
	execPrefix  = regexp.MustCompile(`^template: :\d+:\d+: executing "[^"]*" at <.*?>: `)
	parsePrefix = regexp.MustCompile(`^template: :\d+:(\d+:)? `)
)

func answer(data, source string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("ERROR: panic: %v", r)
		}
	}()
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	delete(funcs, "getHostByName")
	t, err := template.New("").Funcs(funcs).Option("missingkey=error").Parse(source)
	if err != nil {
		return "ERROR: " + parsePrefix.ReplaceAllString(err.Error(), "")
	}
	var in interface{}
	if data == "nfd" {
		in = nodefeaturerule.Data()
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, in); err != nil {
		return "ERROR: " + execPrefix.ReplaceAllString(err.Error(), "")
	}
	return buf.String()
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var req [2]string
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: bad request %q: %v\n", in.Text(), err)
			os.Exit(2)
		}
		if err := enc.Encode(answer(req[0], req[1])); err != nil {
			os.Exit(2)
		}
	}
}
