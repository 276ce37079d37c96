// testapiserver: gpu-labeler's test Kubernetes API server, built from k8s.io/apiserver (Debian's
// golang-k8s-apiserver-dev, fetched by fetch.sh). It serves core/v1 nodes (+ nodes/status) and
// namespaces, admissionregistration.k8s.io/v1 validatingadmissionpolicies and bindings, NFD's
// nfd.k8s-sigs.io/v1alpha1 nodefeatures, and DRA's resource.k8s.io: resourceslices, deviceclasses,
// resourceclaims (+ status) and resourceclaimtemplates in v1, devicetaintrules (+ status) in
// v1beta2 (k8s.io/api 0.36 has it in no GA version), through the real generic registry and request
// handlers (SSA field manager, JSON/merge/strategic patch, watch, Status errors) on etcd, with the
// real ValidatingAdmissionPolicy admission plugin. A policy whose expressions do not compile
// with the plugin's own compiler is refused at create/update, as kube-apiserver refuses it.
//
// What is ours, not Kubernetes': the strategies (k8s.io/kubernetes' internal types, defaulting and
// validation are not in any Debian package: DRA objects get kube's generation, status/spec reset,
// immutable claim specs, taint timeAdded and ResourceSlice field selectors, not its per-kind
// validation such as the 128-device limit or CEL selector compilation), a bearer-token authenticator that reads a JSON file,
// always-allow authorization, the external v1 types standing in as the internal version, and the
// NodeFeature Go type (NFD's v1alpha1 shape: spec.features, spec.labels). The SSA type converter
// comes from client-go's built-in schema (applyconfigurations), because the generic server's own
// path needs generated OpenAPI definitions that no package ships; NodeFeature's is deduced from
// the object, as for a CRD without a schema.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/cel/environment"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	regGV  = admissionregistrationv1.SchemeGroupVersion
	nfdGV  = schema.GroupVersion{Group: "nfd.k8s-sigs.io", Version: "v1alpha1"}
	draGV  = resourcev1.SchemeGroupVersion
	dtrGV  = resourcev1beta2.SchemeGroupVersion
)

// ---- NodeFeature (NFD's CRD, v1alpha1) -------------------------------------------------------

type NodeFeatureSpec struct {
	Features map[string]interface{} `json:"features,omitempty"`
	Labels   map[string]string      `json:"labels,omitempty"`
}

type NodeFeature struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeFeatureSpec `json:"spec"`
}

type NodeFeatureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeFeature `json:"items"`
}

func (in *NodeFeature) deepCopy() *NodeFeature {
	out := &NodeFeature{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Features != nil {
		out.Spec.Features = runtime.DeepCopyJSON(in.Spec.Features)
	}
	if in.Spec.Labels != nil {
		out.Spec.Labels = make(map[string]string, len(in.Spec.Labels))
		for k, v := range in.Spec.Labels {
			out.Spec.Labels[k] = v
		}
	}
	return out
}

func (in *NodeFeature) DeepCopyObject() runtime.Object { return in.deepCopy() }

func (in *NodeFeatureList) DeepCopyObject() runtime.Object {
	out := &NodeFeatureList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range in.Items {
		out.Items = append(out.Items, *in.Items[i].deepCopy())
	}
	return out
}

func init() {
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	// No internal types here: the external v1 Go types are registered as the internal
	// version too, so the handlers' conversions to the hub version are identities.
	scheme.AddKnownTypes(schema.GroupVersion{Version: runtime.APIVersionInternal},
		&corev1.Node{}, &corev1.NodeList{}, &corev1.Namespace{}, &corev1.NamespaceList{})
	scheme.AddKnownTypes(schema.GroupVersion{Group: regGV.Group, Version: runtime.APIVersionInternal},
		&admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{})
	scheme.AddKnownTypes(nfdGV, &NodeFeature{}, &NodeFeatureList{})
	scheme.AddKnownTypes(schema.GroupVersion{Group: nfdGV.Group, Version: runtime.APIVersionInternal},
		&NodeFeature{}, &NodeFeatureList{})
	metav1.AddToGroupVersion(scheme, nfdGV)
	// One Go type for the served and the internal version: converting is copying (the
	// admission plugin converts the object to the version the policy matched).
	utilruntime.Must(scheme.AddConversionFunc((*NodeFeature)(nil), (*NodeFeature)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			*b.(*NodeFeature) = *a.(*NodeFeature).deepCopy()
			return nil
		}))
	utilruntime.Must(scheme.AddConversionFunc((*NodeFeatureList)(nil), (*NodeFeatureList)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			*b.(*NodeFeatureList) = *a.(*NodeFeatureList).DeepCopyObject().(*NodeFeatureList)
			return nil
		}))
	// DRA: all of v1, and of v1beta2 only DeviceTaintRule (no GA version of it in k8s.io/api 0.36),
	// so that no kind is served in two versions and no v1 <-> v1beta2 conversion is needed.
	utilruntime.Must(resourcev1.AddToScheme(scheme))
	scheme.AddKnownTypes(dtrGV, &resourcev1beta2.DeviceTaintRule{}, &resourcev1beta2.DeviceTaintRuleList{})
	metav1.AddToGroupVersion(scheme, dtrGV)
	draTypes := []runtime.Object{
		&resourcev1.ResourceSlice{}, &resourcev1.ResourceSliceList{},
		&resourcev1.DeviceClass{}, &resourcev1.DeviceClassList{},
		&resourcev1.ResourceClaim{}, &resourcev1.ResourceClaimList{},
		&resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaimTemplateList{},
		&resourcev1beta2.DeviceTaintRule{}, &resourcev1beta2.DeviceTaintRuleList{},
	}
	scheme.AddKnownTypes(schema.GroupVersion{Group: draGV.Group, Version: runtime.APIVersionInternal}, draTypes...)
	for _, t := range draTypes {
		// As for NodeFeature: the served and the internal type are one Go type.
		utilruntime.Must(scheme.AddConversionFunc(t, t, func(a, b interface{}, _ conversion.Scope) error {
			reflect.ValueOf(b).Elem().Set(reflect.ValueOf(a.(runtime.Object).DeepCopyObject()).Elem())
			return nil
		}))
	}
	// field selectors kube-apiserver accepts for resourceslices (k8s.io/kubernetes
	// pkg/apis/resource/v1/conversion.go)
	utilruntime.Must(scheme.AddFieldLabelConversionFunc(draGV.WithKind("ResourceSlice"),
		func(label, value string) (string, string, error) {
			switch label {
			case "metadata.name", resourcev1.ResourceSliceSelectorNodeName, resourcev1.ResourceSliceSelectorDriver:
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}))
	// field selectors kube-apiserver accepts for nodes
	utilruntime.Must(scheme.AddFieldLabelConversionFunc(corev1.SchemeGroupVersion.WithKind("Node"),
		func(label, value string) (string, string, error) {
			switch label {
			case "metadata.name", "spec.unschedulable":
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}))
}

// ---- strategies ----------------------------------------------------------------------------

type baseStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func (baseStrategy) NamespaceScoped() bool                                        { return false }
func (baseStrategy) AllowCreateOnUpdate() bool                                    { return false }
func (baseStrategy) AllowUnconditionalUpdate() bool                               { return true }
func (baseStrategy) Canonicalize(runtime.Object)                                  {}
func (baseStrategy) WarningsOnCreate(context.Context, runtime.Object) []string    { return nil }
func (baseStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (baseStrategy) PrepareForCreate(context.Context, runtime.Object)             {}
func (baseStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// Validate: object metadata only (label/annotation syntax, name, managedFields), with
// apimachinery's validation; the per-kind validation of k8s.io/kubernetes is not available.
func (baseStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMeta(objectMeta(obj), false, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

func (s baseStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	return append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(objectMeta(obj), objectMeta(old), field.NewPath("metadata"))...)
}

func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
}

// nodes: as kube-apiserver, the main resource cannot change status, nodes/status cannot
// change spec (nor metadata other than managedFields/resourceVersion).
type nodeStrategy struct{ baseStrategy }

func (nodeStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*corev1.Node).Status = old.(*corev1.Node).Status
}
func (nodeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

type nodeStatusStrategy struct{ baseStrategy }

func (nodeStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	n, o := obj.(*corev1.Node), old.(*corev1.Node)
	n.Spec = o.Spec
	metav1.ResetObjectMetaForStatus(n, o)
}
func (nodeStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))}
}

type nsStrategy struct{ baseStrategy }

func (nsStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*corev1.Namespace).Status.Phase = corev1.NamespaceActive
}

// NodeFeature: namespaced, metadata validation only (a CRD without a schema).
type nodeFeatureStrategy struct{ baseStrategy }

func (nodeFeatureStrategy) NamespaceScoped() bool     { return true }
func (nodeFeatureStrategy) AllowCreateOnUpdate() bool { return true }
func (s nodeFeatureStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMeta(objectMeta(obj), true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}
func (s nodeFeatureStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	return append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(objectMeta(obj), objectMeta(old), field.NewPath("metadata"))...)
}

// VAP defaulting that kube-apiserver does (k8s.io/kubernetes/pkg/apis/admissionregistration/v1
// defaults); without it, nil object selectors would match nothing.
type vapStrategy struct{ baseStrategy }

func defaultMatch(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	if m.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		m.MatchPolicy = &eq
	}
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rs {
			if rs[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				rs[i].Scope = &all
			}
		}
	}
}

func defaultVAP(obj runtime.Object) {
	switch p := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		if p.Spec.FailurePolicy == nil {
			f := admissionregistrationv1.Fail
			p.Spec.FailurePolicy = &f
		}
		defaultMatch(p.Spec.MatchConstraints)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		defaultMatch(p.Spec.MatchResources)
	}
}
// compileErrors compiles a policy's expressions as kube-apiserver's validation does, with the
// admission plugin's own composited compiler (variables first, so that `variables.x` is typed),
// and returns one error a failing expression.
func compileErrors(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	mode := environment.NewExpressions
	check := func(path *field.Path, expr string, r plugincel.CompilationResult) {
		if r.Error != nil {
			errs = append(errs, field.Invalid(path, expr, r.Error.Detail))
		}
	}
	spec := field.NewPath("spec")
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, mode)
		check(spec.Child("variables").Index(i).Child("expression"), v.Expression, r)
	}
	for i, c := range p.Spec.MatchConditions {
		r := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: c.Expression}, opts, mode)
		check(spec.Child("matchConditions").Index(i).Child("expression"), c.Expression, r)
	}
	for i, v := range p.Spec.Validations {
		r := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, opts, mode)
		check(spec.Child("validations").Index(i).Child("expression"), v.Expression, r)
		if v.MessageExpression != "" {
			r := compiler.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, opts, mode)
			check(spec.Child("validations").Index(i).Child("messageExpression"), v.MessageExpression, r)
		}
	}
	return errs
}

func (s vapStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := s.baseStrategy.Validate(ctx, obj)
	if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
		errs = append(errs, compileErrors(p)...)
	}
	return errs
}

func (s vapStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	return append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(objectMeta(obj), objectMeta(old), field.NewPath("metadata"))...)
}

func (vapStrategy) PrepareForCreate(_ context.Context, obj runtime.Object)      { defaultVAP(obj) }
func (vapStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) { defaultVAP(obj) }

// DRA kinds, as k8s.io/kubernetes' strategies (pkg/registry/resource/*/strategy.go) treat them:
// generation 1 at create and bumped when the spec changes; a kind with a status keeps it on the
// main resource and keeps its spec on /status; a claim's and a template's spec is immutable; a
// DeviceTaintRule's taint gets its timeAdded. Not kube's per-kind validation.
type draStrategy struct {
	baseStrategy
	namespaced    bool
	hasStatus     bool
	immutableSpec bool
	apiVersion    fieldpath.APIVersion
}

func objField(obj runtime.Object, name string) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName(name)
}

func (s draStrategy) NamespaceScoped() bool { return s.namespaced }

func (s draStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	objectMeta(obj).Generation = 1
	if s.hasStatus {
		st := objField(obj, "Status")
		st.Set(reflect.Zero(st.Type()))
	}
	if r, ok := obj.(*resourcev1beta2.DeviceTaintRule); ok {
		defaultTimeAdded(&r.Spec.Taint, nil)
	}
}

func (s draStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.hasStatus {
		objField(obj, "Status").Set(objField(old, "Status"))
	}
	if r, ok := obj.(*resourcev1beta2.DeviceTaintRule); ok {
		defaultTimeAdded(&r.Spec.Taint, &old.(*resourcev1beta2.DeviceTaintRule).Spec.Taint)
	}
	if !apiequality.Semantic.DeepEqual(objField(obj, "Spec").Interface(), objField(old, "Spec").Interface()) {
		objectMeta(obj).Generation = objectMeta(old).Generation + 1
	}
}

// defaultTimeAdded: as DeviceTaint.TimeAdded's documentation says (k8s.io/api resource/v1beta2):
// set when not given, and set anew when the effect changes with the old time given back.
func defaultTimeAdded(t, old *resourcev1beta2.DeviceTaint) {
	now := metav1.Now().Rfc3339Copy()
	switch {
	case old == nil:
		if t.TimeAdded == nil {
			t.TimeAdded = &now
		}
	case t.TimeAdded == nil:
		if t.Effect == old.Effect && old.TimeAdded != nil {
			t.TimeAdded = old.TimeAdded.DeepCopy()
		} else {
			t.TimeAdded = &now
		}
	case t.Effect != old.Effect && old.TimeAdded != nil && t.TimeAdded.Equal(old.TimeAdded):
		t.TimeAdded = &now
	}
}

func (s draStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMeta(objectMeta(obj), s.namespaced, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

func (s draStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(objectMeta(obj), objectMeta(old), field.NewPath("metadata"))...)
	if s.immutableSpec {
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(objField(obj, "Spec").Interface(), objField(old, "Spec").Interface(), field.NewPath("spec"))...)
	}
	return errs
}

func (s draStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !s.hasStatus {
		return nil
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{s.apiVersion: fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

// The /status of a DRA kind: spec and metadata (but managedFields) stay as they are.
type draStatusStrategy struct{ draStrategy }

func (draStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	objField(obj, "Spec").Set(objField(old, "Spec"))
	metav1.ResetObjectMetaForStatus(objectMeta(obj), objectMeta(old))
}

func (s draStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{s.apiVersion: fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))}
}

// ---- storage ---------------------------------------------------------------------------------

func nodeAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil, fmt.Errorf("not a node")
	}
	fs := generic.ObjectMetaFieldsSet(&n.ObjectMeta, false)
	fs["spec.unschedulable"] = fmt.Sprint(n.Spec.Unschedulable)
	return labels.Set(n.Labels), fs, nil
}

func metaAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}, nil
}

// resourceSliceAttrs: the fields a ResourceSlice can be selected by, as kube's registry has them
// (pkg/registry/resource/resourceslice/strategy.go); spec.nodeName is "" for a slice of no node.
func resourceSliceAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	sl, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil, fmt.Errorf("not a resourceslice")
	}
	fs := generic.ObjectMetaFieldsSet(&sl.ObjectMeta, false)
	fs[resourcev1.ResourceSliceSelectorNodeName] = sliceNodeName(sl)
	fs[resourcev1.ResourceSliceSelectorDriver] = sl.Spec.Driver
	return labels.Set(sl.Labels), fs, nil
}

func sliceNodeName(sl *resourcev1.ResourceSlice) string {
	if sl.Spec.NodeName == nil {
		return ""
	}
	return *sl.Spec.NodeName
}

// A store's watch-cache index on one field, as kube indexes resourceslices by spec.nodeName: the
// cache serves a list by that field from the index and hands a watch only the events of
// its value (the trigger), not every slice of the cluster.
type fieldIndex struct {
	field string
	value func(runtime.Object) string
}

func newStore(getter generic.RESTOptionsGetter, gr schema.GroupResource, singular string,
	newObj, newList func() runtime.Object, strategy interface {
		rest.RESTCreateStrategy
		rest.RESTUpdateStrategy
	}, attrs storage.AttrFunc, index ...fieldIndex) *genericregistry.Store {
	opts := &generic.StoreOptions{RESTOptions: getter, AttrFunc: attrs}
	var indexFields []string
	for _, ix := range index {
		ix := ix
		indexFields = append(indexFields, ix.field)
		if opts.TriggerFunc == nil {
			opts.TriggerFunc = storage.IndexerFuncs{}
			opts.Indexers = &cache.Indexers{}
		}
		opts.TriggerFunc[ix.field] = ix.value
		(*opts.Indexers)[storage.FieldIndex(ix.field)] = func(obj interface{}) ([]string, error) {
			o, ok := obj.(runtime.Object)
			if !ok {
				return nil, fmt.Errorf("not an object: %T", obj)
			}
			return []string{ix.value(o)}, nil
		}
	}
	s := &genericregistry.Store{
		NewFunc:                   newObj,
		NewListFunc:               newList,
		DefaultQualifiedResource:  gr,
		SingularQualifiedResource: schema.GroupResource{Group: gr.Group, Resource: singular},
		PredicateFunc: func(l labels.Selector, f fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: l, Field: f, GetAttrs: attrs, IndexFields: indexFields}
		},
		CreateStrategy: strategy,
		UpdateStrategy: strategy,
		DeleteStrategy: strategy,
		TableConvertor: rest.NewDefaultTableConvertor(gr),
	}
	if rf, ok := strategy.(rest.ResetFieldsStrategy); ok {
		s.ResetFieldsStrategy = rf
	}
	if err := s.CompleteWithOptions(opts); err != nil {
		klog.Fatalf("store %v: %v", gr, err)
	}
	return s
}

// statusREST exposes get/update/patch/apply only, as kube's StatusREST types do.
type statusREST struct{ store *genericregistry.Store }

func (r *statusREST) New() runtime.Object { return r.store.New() }
func (r *statusREST) Destroy()            {}
func (r *statusREST) Get(ctx context.Context, name string, o *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, o)
}
func (r *statusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo,
	cv rest.ValidateObjectFunc, uv rest.ValidateObjectUpdateFunc, _ bool, o *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, cv, uv, false, o)
}
func (r *statusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}
func (r *statusREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, obj, opts)
}

// ---- authentication ----------------------------------------------------------------------------

type tokenUser struct {
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra"`
}

// tokenAuthenticator reads the token file on every request, so that a test can add an identity
// (a token bound to another node, another service account) to a running server.
func tokenAuthenticator(path string) authenticator.Request {
	return bearertoken.New(authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		users := map[string]tokenUser{}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, false, fmt.Errorf("token file: %w", err)
		}
		if err := json.Unmarshal(b, &users); err != nil {
			return nil, false, fmt.Errorf("token file: %w", err)
		}
		u, ok := users[token]
		if !ok {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: u.Username, UID: u.UID,
			Groups: append(append([]string{}, u.Groups...), user.AllAuthenticated), Extra: u.Extra}}, true, nil
	}))
}

// ---- API installation (without the generic server's OpenAPI-derived type converter) ------------

// servedVersion: one version of an API group, its resources and their SSA type converter.
type servedVersion struct {
	gv      schema.GroupVersion
	storage map[string]rest.Storage
	tc      managedfields.TypeConverter
}

// install serves the versions of one API group, preferred first, with one discovery web service
// for the group: go-restful exits on a second web service at the group's root path.
func install(s *genericapiserver.GenericAPIServer, c genericapiserver.CompletedConfig, addr string, versions ...servedVersion) {
	group := versions[0].gv.Group
	root := "/apis"
	if group == "" {
		root = "/api"
	}
	// Which versions serve each resource, over the whole group.
	served := map[string][]string{}
	for _, v := range versions {
		for r := range v.storage {
			gvs := v.gv.String()
			if group == "" {
				gvs = v.gv.Version
			}
			served[r] = append(served[r], gvs)
		}
	}
	g := metav1.APIGroup{Name: group}
	for _, v := range versions {
		agv := &genericapi.APIGroupVersion{
			Root:                        root,
			GroupVersion:                v.gv,
			AllServedVersionsByResource: served,
			Storage:                     v.storage,
			ParameterCodec:              runtime.NewParameterCodec(scheme),
			Serializer:                  codecs,
			Creater:                     scheme,
			Convertor:                   scheme,
			ConvertabilityChecker:       scheme,
			UnsafeConvertor:             runtime.UnsafeObjectConvertor(scheme),
			Defaulter:                   scheme,
			Typer:                       scheme,
			Namer:                       runtime.Namer(meta.NewAccessor()),
			EquivalentResourceRegistry:  s.EquivalentResourceRegistry,
			Admit:                       c.AdmissionControl,
			MinRequestTimeout:           time.Duration(c.MinRequestTimeout) * time.Second,
			Authorizer:                  c.Authorization.Authorizer,
			TypeConverter:               v.tc,
			MaxRequestBodyBytes:         3 * 1024 * 1024,
		}
		res, _, err := agv.InstallREST(s.Handler.GoRestfulContainer)
		if err != nil {
			klog.Fatalf("install %v: %v", v.gv, err)
		}
		vd := apidiscoveryv2.APIVersionDiscovery{Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Version: v.gv.Version, Resources: res}
		if group == "" {
			s.AggregatedLegacyDiscoveryGroupManager.AddGroupVersion("", vd)
			continue
		}
		s.AggregatedDiscoveryGroupManager.AddGroupVersion(group, vd)
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v.gv.String(), Version: v.gv.Version})
	}
	if group == "" {
		legacy := discovery.NewLegacyRootAPIHandler(discovery.DefaultAddresses{DefaultAddress: addr}, s.Serializer, "/api")
		wrapped := discoveryendpoint.WrapAggregatedDiscoveryToHandler(legacy, s.AggregatedLegacyDiscoveryGroupManager, s.AggregatedLegacyDiscoveryGroupManager)
		s.Handler.GoRestfulContainer.Add(wrapped.GenerateWebService("/api", metav1.APIVersions{}))
		return
	}
	g.PreferredVersion = g.Versions[0]
	s.DiscoveryGroupManager.AddGroup(g)
	s.Handler.GoRestfulContainer.Add(discovery.NewAPIGroupHandler(s.Serializer, g).WebService())
}

func main() {
	var (
		port      = flag.Int("port", 6443, "secure port on 127.0.0.1 (0: pick one)")
		etcd      = flag.String("etcd-servers", "http://127.0.0.1:2379", "etcd endpoints, comma-separated")
		prefix    = flag.String("etcd-prefix", "/registry", "etcd key prefix")
		tokens    = flag.String("token-file", "", `JSON: {"<token>": {"username":..., "groups":[...], "extra":{"k":["v"]}}}`)
		certDir   = flag.String("cert-dir", "", "directory for the self-signed serving certificate")
		watchCache = flag.Bool("watch-cache", true, "serve lists/watches from the watch cache, as kube-apiserver does")
	)
	klog.InitFlags(nil)
	flag.Parse()
	ctx := genericapiserver.SetupSignalContext()

	sso := genericoptions.NewSecureServingOptions().WithLoopback()
	sso.BindAddress = net.ParseIP("127.0.0.1")
	sso.BindPort = *port
	sso.ServerCert.CertDirectory = *certDir
	sso.ServerCert.PairName = "apiserver"
	if err := sso.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		klog.Fatal(err)
	}

	config := genericapiserver.NewRecommendedConfig(codecs)
	config.EffectiveVersion = utilcompatibility.DefaultBuildEffectiveVersion()
	if err := sso.ApplyTo(&config.SecureServing, &config.LoopbackClientConfig); err != nil {
		klog.Fatal(err)
	}
	eo := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(*prefix,
		// Storage versions: v1 for the v1 kinds, v1beta2 for DeviceTaintRule (each kind is stored
		// in the one listed version that has it).
		codecs.LegacyCodec(corev1.SchemeGroupVersion, regGV, nfdGV, draGV, dtrGV)))
	eo.StorageConfig.Transport.ServerList = strings.Split(*etcd, ",")
	eo.EnableWatchCache = *watchCache
	if err := eo.ApplyTo(&config.Config); err != nil {
		klog.Fatal(err)
	}
	config.Authentication.Authenticator = tokenAuthenticator(*tokens)
	config.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()

	// The admission plugin watches policies and bindings (and namespaces) through this server.
	kubeClient := kubernetes.NewForConfigOrDie(config.LoopbackClientConfig)
	dynClient := dynamic.NewForConfigOrDie(config.LoopbackClientConfig)
	factory := informers.NewSharedInformerFactory(kubeClient, 10*time.Minute)
	config.SharedInformerFactory = factory
	ao := genericoptions.NewAdmissionOptions()
	ao.RecommendedPluginOrder = []string{"ValidatingAdmissionPolicy"}
	ao.DefaultOffPlugins = nil
	if err := ao.ApplyTo(&config.Config, factory, kubeClient, dynClient, utilfeature.DefaultFeatureGate, config.EffectiveVersion); err != nil {
		klog.Fatal(err)
	}

	completed := config.Complete()
	server, err := completed.New("test-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		klog.Fatal(err)
	}

	tc := applyconfigurations.NewTypeConverter(scheme)
	ro := config.RESTOptionsGetter
	bs := baseStrategy{scheme, names.SimpleNameGenerator}
	nodes := newStore(ro, corev1.Resource("nodes"), "node",
		func() runtime.Object { return &corev1.Node{} }, func() runtime.Object { return &corev1.NodeList{} },
		nodeStrategy{bs}, nodeAttrs)
	nodeStatus := *nodes
	nodeStatus.UpdateStrategy = nodeStatusStrategy{bs}
	nodeStatus.ResetFieldsStrategy = nodeStatusStrategy{bs}
	namespaces := newStore(ro, corev1.Resource("namespaces"), "namespace",
		func() runtime.Object { return &corev1.Namespace{} }, func() runtime.Object { return &corev1.NamespaceList{} },
		nsStrategy{bs}, metaAttrs)
	addr := fmt.Sprintf("127.0.0.1:%d", *port)
	install(server, completed, addr, servedVersion{corev1.SchemeGroupVersion, map[string]rest.Storage{
		"nodes": nodes, "nodes/status": &statusREST{&nodeStatus}, "namespaces": namespaces,
	}, tc})
	vaps := newStore(ro, regGV.WithResource("validatingadmissionpolicies").GroupResource(), "validatingadmissionpolicy",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
		vapStrategy{bs}, metaAttrs)
	vapbs := newStore(ro, regGV.WithResource("validatingadmissionpolicybindings").GroupResource(), "validatingadmissionpolicybinding",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
		vapStrategy{bs}, metaAttrs)
	install(server, completed, addr, servedVersion{regGV, map[string]rest.Storage{
		"validatingadmissionpolicies": vaps, "validatingadmissionpolicybindings": vapbs,
	}, tc})

	nfs := newStore(ro, nfdGV.WithResource("nodefeatures").GroupResource(), "nodefeature",
		func() runtime.Object { return &NodeFeature{} }, func() runtime.Object { return &NodeFeatureList{} },
		nodeFeatureStrategy{bs}, metaAttrs)
	install(server, completed, addr, servedVersion{nfdGV, map[string]rest.Storage{"nodefeatures": nfs},
		managedfields.NewDeducedTypeConverter()})

	// resource.k8s.io: v1 (preferred) and v1beta2 (DeviceTaintRule only), one group.
	dra := func(gv schema.GroupVersion, namespaced, hasStatus, immutableSpec bool) draStrategy {
		return draStrategy{bs, namespaced, hasStatus, immutableSpec, fieldpath.APIVersion(gv.String())}
	}
	slices := newStore(ro, draGV.WithResource("resourceslices").GroupResource(), "resourceslice",
		func() runtime.Object { return &resourcev1.ResourceSlice{} }, func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		dra(draGV, false, false, false), resourceSliceAttrs,
		fieldIndex{resourcev1.ResourceSliceSelectorNodeName, func(o runtime.Object) string {
			if sl, ok := o.(*resourcev1.ResourceSlice); ok {
				return sliceNodeName(sl)
			}
			return ""
		}})
	classes := newStore(ro, draGV.WithResource("deviceclasses").GroupResource(), "deviceclass",
		func() runtime.Object { return &resourcev1.DeviceClass{} }, func() runtime.Object { return &resourcev1.DeviceClassList{} },
		dra(draGV, false, false, false), metaAttrs)
	claimStrategy := dra(draGV, true, true, true)
	claims := newStore(ro, draGV.WithResource("resourceclaims").GroupResource(), "resourceclaim",
		func() runtime.Object { return &resourcev1.ResourceClaim{} }, func() runtime.Object { return &resourcev1.ResourceClaimList{} },
		claimStrategy, metaAttrs)
	claimStatus := *claims
	claimStatus.UpdateStrategy = draStatusStrategy{claimStrategy}
	claimStatus.ResetFieldsStrategy = draStatusStrategy{claimStrategy}
	templates := newStore(ro, draGV.WithResource("resourceclaimtemplates").GroupResource(), "resourceclaimtemplate",
		func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
		dra(draGV, true, false, true), metaAttrs)
	dtrStrategy := dra(dtrGV, false, true, false)
	rules := newStore(ro, dtrGV.WithResource("devicetaintrules").GroupResource(), "devicetaintrule",
		func() runtime.Object { return &resourcev1beta2.DeviceTaintRule{} },
		func() runtime.Object { return &resourcev1beta2.DeviceTaintRuleList{} },
		dtrStrategy, metaAttrs)
	ruleStatus := *rules
	ruleStatus.UpdateStrategy = draStatusStrategy{dtrStrategy}
	ruleStatus.ResetFieldsStrategy = draStatusStrategy{dtrStrategy}
	install(server, completed, addr,
		servedVersion{draGV, map[string]rest.Storage{
			"resourceslices": slices, "deviceclasses": classes, "resourceclaims": claims,
			"resourceclaims/status": &statusREST{&claimStatus}, "resourceclaimtemplates": templates,
		}, tc},
		servedVersion{dtrGV, map[string]rest.Storage{
			"devicetaintrules": rules, "devicetaintrules/status": &statusREST{&ruleStatus},
		}, tc})

	// Graceful shutdown waits for open watches up to this, not the request timeout (60 s): a
	// test's stop must not outlive its wait.
	server.ShutdownTimeout = 3 * time.Second

	if err := server.PrepareRun().RunWithContext(ctx); err != nil {
		klog.Fatal(err)
	}
}
