package metrics

import (
	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// otherPlugin is the plugin label of every volume whose plugin volrecon
// does not know: plugin dir names come from disk (FlexVolume plugins are
// named after their driver), so they are not used as label values.
const otherPlugin = "other"

// pluginLabel is the plugin label value of a volume.
func pluginLabel(plugin string) string {
	if reconstruct.KnownPlugin(plugin) {
		return plugin
	}
	return otherPlugin
}

// The fixed vocabularies whose label values are always exported, at 0
// when absent.
var (
	allPodStatuses  = reconstruct.PodStatuses()
	allVolumeStates = reconstruct.VolumeStates()
	allModes        = []podsdir.Mode{podsdir.Filesystem, podsdir.Block}
	allSeverities   = reconstruct.Severities()
	allFindingKinds = reconstruct.FindingKinds()
	// The kinds of volrecon_critical_findings.
	sometimesCriticalKinds = reconstruct.SometimesCriticalKinds()
	allActionKinds         = cleanup.ActionKinds()
	allResults             = cleanup.Results()
	// CSI calls and their results are strings, not typed vocabularies.
	allCSICalls       = cleanup.CSICalls()
	allCSICallResults = cleanup.CSICallResults()
)
