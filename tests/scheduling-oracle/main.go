// oracle: kube-scheduler's node filters for labels and taints, with Kubernetes' own code
// (k8s.io/component-helpers 0.36), for tests/scheduling_oracle.rs.
//
// Reads one JSON object per line, {"pod": Pod, "nodes": [Node, ...]}. Writes one JSON object
// per line: {"refused": [field paths the API server refuses], "nodes": [{"affinity": bool,
// "taint": "key: value" or null, "unschedulable": bool, "score": n or null}, ...]}.
//
//   - affinity: the NodeAffinity plugin's filter, nodeaffinity.GetRequiredNodeAffinity(pod).
//     Match(node) (nodeSelector and the required terms; an error counts as no match, as the
//     plugin counts it).
//   - taint: the TaintToleration plugin's filter, corev1.FindMatchingUntoleratedTaint over the
//     NoSchedule and NoExecute taints (DoNotScheduleTaintsFilterFunc), the comparison
//     operators off (the TaintTolerationComparisonOperators gate's default); its message names
//     the taint as the plugin's does.
//   - unschedulable: the NodeUnschedulable plugin: a cordoned node whose
//     node.kubernetes.io/unschedulable:NoSchedule taint the pod does not tolerate.
//   - score: the NodeAffinity plugin's preferred score, nodeaffinity.NewPreferredSchedulingTerms
//     (...).Score(node); null where the terms do not parse (the plugin fails the pod then).
//
// "refused" is the API server's validation of those fields on create (k8s.io/kubernetes
// pkg/apis/core/validation: ValidatePodSpec's nodeSelector, validateNodeAffinity and
// ValidateTolerations as of 1.36). Debian packages no k8s.io/kubernetes, so validate() below
// restates those functions over apimachinery's validators, which are what they call.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

type request struct {
	Pod   v1.Pod    `json:"pod"`
	Nodes []v1.Node `json:"nodes"`
}

type verdict struct {
	Affinity      bool    `json:"affinity"`
	Taint         *string `json:"taint"`
	Unschedulable bool    `json:"unschedulable"`
	Score         *int64  `json:"score"`
}

type answer struct {
	Refused []string  `json:"refused"`
	Nodes   []verdict `json:"nodes"`
}

// doNotSchedule is the scheduler's helper.DoNotScheduleTaintsFilterFunc.
func doNotSchedule(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

func evaluate(req *request) answer {
	logger := klog.Background()
	pod := &req.Pod
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	var preferred *nodeaffinity.PreferredSchedulingTerms
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	} else {
		preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(nil)
	}
	out := answer{Refused: validate(&pod.Spec), Nodes: []verdict{}}
	for i := range req.Nodes {
		node := &req.Nodes[i]
		var v verdict
		v.Affinity, _ = required.Match(node)
		if t, untolerated := corev1.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false); untolerated {
			s := fmt.Sprintf("%s: %s", t.Key, t.Value)
			v.Taint = &s
		}
		cordon := v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
		v.Unschedulable = node.Spec.Unschedulable && !corev1.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &cordon, false)
		if preferred != nil {
			s := preferred.Score(node)
			v.Score = &s
		}
		out.Nodes = append(out.Nodes, v)
	}
	return out
}

// validate: the paths of the API server's errors for the fields scheduling reads, sorted.
func validate(spec *v1.PodSpec) []string {
	p := field.NewPath("spec")
	errs := metavalidation.ValidateLabels(spec.NodeSelector, p.Child("nodeSelector"))
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		na := p.Child("affinity", "nodeAffinity")
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			errs = append(errs, nodeSelector(r, na.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			at := na.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if t.Weight <= 0 || t.Weight > 100 {
				errs = append(errs, field.Invalid(at.Child("weight"), t.Weight, "must be in the range 1-100"))
			}
			errs = append(errs, nodeSelectorTerm(t.Preference, at.Child("preference"))...)
		}
	}
	errs = append(errs, tolerations(spec.Tolerations, p.Child("tolerations"))...)
	paths := []string{}
	seen := map[string]bool{}
	for _, e := range errs {
		if !seen[e.Field] {
			seen[e.Field] = true
			paths = append(paths, e.Field)
		}
	}
	sort.Strings(paths)
	return paths
}

// ValidateNodeSelector.
func nodeSelector(ns *v1.NodeSelector, p *field.Path) field.ErrorList {
	terms := p.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(terms, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, t := range ns.NodeSelectorTerms {
		errs = append(errs, nodeSelectorTerm(t, terms.Index(i))...)
	}
	return errs
}

// ValidateNodeSelectorTerm, label values checked (AllowInvalidLabelValueInRequiredNodeAffinity
// is false on create).
func nodeSelectorTerm(t v1.NodeSelectorTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, r := range t.MatchExpressions {
		errs = append(errs, nodeSelectorRequirement(r, p.Child("matchExpressions").Index(j))...)
	}
	for j, r := range t.MatchFields {
		errs = append(errs, nodeFieldSelectorRequirement(r, p.Child("matchFields").Index(j))...)
	}
	return errs
}

// ValidateNodeSelectorRequirement.
func nodeSelectorRequirement(r v1.NodeSelectorRequirement, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch r.Operator {
	case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			errs = append(errs, field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			errs = append(errs, field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(p.Child("operator"), r.Operator, "not a valid selector operator"))
	}
	errs = append(errs, metavalidation.ValidateLabelName(r.Key, p.Child("key"))...)
	for i, v := range r.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

// ValidateNodeFieldSelectorRequirement: metadata.name is the only field, its values node names.
func nodeFieldSelectorRequirement(r v1.NodeSelectorRequirement, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch r.Operator {
	case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
		if len(r.Values) != 1 {
			errs = append(errs, field.Required(p.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(p.Child("operator"), r.Operator, "not a valid selector operator"))
	}
	if r.Key != "metadata.name" {
		errs = append(errs, field.Invalid(p.Child("key"), r.Key, "not a valid field selector key"))
	} else {
		for i, v := range r.Values {
			for _, msg := range apivalidation.NameIsDNSSubdomain(v, false) {
				errs = append(errs, field.Invalid(p.Child("values").Index(i), v, msg))
			}
		}
	}
	return errs
}

// ValidateTolerations, the comparison operators' gate off.
func tolerations(ts []v1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		at := p.Index(i)
		if len(t.Key) > 0 {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, at.Child("key"))...)
		}
		if len(t.Key) == 0 && t.Operator != v1.TolerationOpExists {
			errs = append(errs, field.Invalid(at.Child("operator"), t.Operator, "operator must be Exists when `key` is empty"))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(at.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(at.Child("operator"), t.Value, msg))
			}
		case v1.TolerationOpExists:
			if len(t.Value) > 0 {
				errs = append(errs, field.Invalid(at.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(at.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		if len(t.Effect) > 0 {
			switch t.Effect {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(at.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
			}
		}
	}
	return errs
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: line is not a request: %v\n", err)
			os.Exit(2)
		}
		if err := enc.Encode(evaluate(&req)); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
		os.Exit(2)
	}
}
