// The DRA allocator oracle: Kubernetes' own structured allocator
// (k8s.io/dynamic-resource-allocation/structured, the v0.36 tag) run over the cases that
// generate.py writes, as kube-scheduler's DynamicResources plugin calls it: one Allocate per
// case for the case's node and its unallocated claims, with the devices of its allocated
// claims in use, the features the stable allocator supports (AdminAccess, PrioritizedList,
// PartitionableDevices, DeviceTaints; and ConsumableCapacity for a case that asks). Each case's verdict is "ok" (every claim allocated:
// the devices), "unschedulable" (Allocate found no allocation) or "error" (Allocate failed:
// its error). Each case runs four times: the allocator takes pools in Go's map order, and a
// case whose verdict depends on that order is refused ("unstable"), not recorded.
//
// Usage: dra-oracle CASES.json > VERDICTS.json
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type testCase struct {
	ID string `json:"id"`
	// distinctAttribute is DRAConsumableCapacity's: such a case runs with it (the incubating
	// allocator, as kube-scheduler picks it when the feature is on).
	ConsumableCapacity bool                        `json:"consumableCapacity,omitempty"`
	Node               v1.Node                     `json:"node"`
	Slices             []resourceapi.ResourceSlice `json:"slices"`
	Classes            []resourceapi.DeviceClass   `json:"classes"`
	Claims             []resourceapi.ResourceClaim `json:"claims"`
	Allocated          []resourceapi.ResourceClaim `json:"allocated"`
}

type verdict struct {
	ID      string     `json:"id"`
	Verdict string     `json:"verdict"`
	Error   string     `json:"error,omitempty"`
	Devices [][]string `json:"devices,omitempty"`
	// The allocator's own count of its search steps (allocateOne calls): record.py leaves out
	// a case whose search is too long to replay in CI's time.
	Steps int64 `json:"steps"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, errors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclass"}, name)
}

func run(c *testCase, cache *cel.Cache) verdict {
	ctx := context.Background()
	features := structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true, ConsumableCapacity: c.ConsumableCapacity}
	classes := classLister{}
	for i := range c.Classes {
		classes[c.Classes[i].Name] = &c.Classes[i]
	}
	allocated := sets.New[structured.DeviceID]()
	for _, a := range c.Allocated {
		if a.Status.Allocation == nil {
			continue
		}
		for _, r := range a.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	slices := make([]*resourceapi.ResourceSlice, len(c.Slices))
	for i := range c.Slices {
		slices[i] = &c.Slices[i]
	}
	claims := make([]*resourceapi.ResourceClaim, len(c.Claims))
	for i := range c.Claims {
		claims[i] = &c.Claims[i]
	}
	v := verdict{ID: c.ID}
	alloc, err := structured.NewAllocator(ctx, features, structured.AllocatedState{AllocatedDevices: allocated}, classes, slices, cache)
	if err != nil {
		v.Verdict, v.Error = "error", err.Error()
		return v
	}
	results, err := alloc.Allocate(ctx, &c.Node, claims)
	// GetStats returns an internal type: read its one field by name.
	if m := reflect.ValueOf(alloc).MethodByName("GetStats"); m.IsValid() {
		v.Steps = m.Call(nil)[0].FieldByName("NumAllocateOneInvocations").Int()
	}
	switch {
	case err != nil:
		v.Verdict, v.Error = "error", err.Error()
	case results == nil:
		v.Verdict = "unschedulable"
	default:
		v.Verdict = "ok"
		for _, r := range results {
			var devs []string
			for _, d := range r.Devices.Results {
				devs = append(devs, fmt.Sprintf("%s/%s/%s", d.Driver, d.Pool, d.Device))
			}
			v.Devices = append(v.Devices, devs)
		}
	}
	return v
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dra-oracle CASES.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var file struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		fmt.Fprintln(os.Stderr, "cases:", err)
		os.Exit(1)
	}
	cache := cel.NewCache(1000, cel.Features{})
	cases := file.Cases
	out := make([]verdict, 0, len(cases))
	for i := range cases {
		first := run(&cases[i], cache)
		for k := 1; k < 4; k++ {
			again := run(&cases[i], cache)
			if again.Verdict != first.Verdict {
				first.Verdict = "unstable"
				first.Error = fmt.Sprintf("%s once, %s another time", first.Verdict, again.Verdict)
				break
			}
		}
		out = append(out, first)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
