// print-crds writes, as one multi-document YAML stream on stdout, every CustomResourceDefinition that KubeVirt's
// virt-operator installs, built by KubeVirt's own constructors so the schemas are exactly the release's.
//
// It is our code, but it only compiles inside an unpacked KubeVirt source tree: e2e/kubevirt/build.sh copies it to
// <tree>/tools/persistent-ips-print-crds/ and builds it there with -mod=vendor. The list is virt-operator's install
// strategy (pkg/virt-operator/resource/generate/install/strategy.go) plus the KubeVirt CRD itself, which the
// operator's own manifests carry.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
)

func main() {
	constructors := []func() (*extv1.CustomResourceDefinition, error){
		components.NewKubeVirtCrd,
		components.NewVirtualMachineInstanceCrd, components.NewPresetCrd, components.NewReplicaSetCrd,
		components.NewVirtualMachineCrd, components.NewVirtualMachineInstanceMigrationCrd,
		components.NewVirtualMachineSnapshotCrd, components.NewVirtualMachineSnapshotContentCrd,
		components.NewVirtualMachineRestoreCrd, components.NewVirtualMachineInstancetypeCrd,
		components.NewVirtualMachineClusterInstancetypeCrd, components.NewVirtualMachinePoolCrd,
		components.NewMigrationPolicyCrd, components.NewVirtualMachinePreferenceCrd,
		components.NewVirtualMachineClusterPreferenceCrd, components.NewVirtualMachineExportCrd,
		components.NewVirtualMachineCloneCrd, components.NewVirtualMachineBackupCrd,
		components.NewVirtualMachineBackupTrackerCrd, components.NewPluginCrd,
	}
	for _, construct := range constructors {
		crd, err := construct()
		if err != nil {
			fail(err)
		}
		// The status of a generated CRD is empty; leaving it out keeps the documents what one would write by hand.
		raw, err := json.Marshal(crd)
		if err != nil {
			fail(err)
		}
		var doc map[string]interface{}
		if err := json.Unmarshal(raw, &doc); err != nil {
			fail(err)
		}
		delete(doc, "status")
		if meta, ok := doc["metadata"].(map[string]interface{}); ok {
			delete(meta, "creationTimestamp")
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			fail(err)
		}
		fmt.Printf("---\n%s", out)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "print-crds: %v\n", err)
	os.Exit(1)
}
