package metrics

import (
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

// The fixed vocabularies whose label values are always exported.
var (
	allPodStatuses = []reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodOrphaned, reconstruct.PodUnknown}

	allVolumeStates = []reconstruct.VolumeState{reconstruct.Mounted, reconstruct.Unmounted, reconstruct.Uncertain}

	allModes = []podsdir.Mode{podsdir.Filesystem, podsdir.Block}

	allSeverities = []reconstruct.Severity{reconstruct.SeverityInfo, reconstruct.SeverityWarning, reconstruct.SeverityCritical}

	// allFindingKinds must list every FindingKind of package reconstruct
	// (TestAllFindingKinds checks it against the source). A kind missing here
	// is still exported while present, just not at 0 when absent.
	allFindingKinds = []reconstruct.FindingKind{
		reconstruct.OrphanedPodMounted,
		reconstruct.OrphanedPodRemovable,
		reconstruct.LeakedGlobalMount,
		reconstruct.StaleVolumeData,
		reconstruct.MissingVolumeData,
		reconstruct.CorruptVolumeData,
		reconstruct.CorruptedMount,
		reconstruct.HungMount,
		reconstruct.RootDiskBackedMount,
		reconstruct.StackedMount,
		reconstruct.DataOnNodeDisk,
		reconstruct.UnknownPlugin,
		reconstruct.InconsistentMountTable,
		reconstruct.UnexpectedEntry,
		reconstruct.StagingHashMismatch,
		reconstruct.LegacyLayout,
		reconstruct.SELinuxContextMismatch,
	}

	allActionKinds = []reconstruct.ActionKind{
		reconstruct.Rmdir, reconstruct.Unlink, reconstruct.RemoveVolumeData,
		reconstruct.Unmount, reconstruct.NeedsDriver, reconstruct.Keep,
	}

	allResults = []reconstruct.Result{reconstruct.Done, reconstruct.Skipped, reconstruct.Failed}
)
