package reconstruct

import "context"

// ClusterChecker gives the findings only the cluster's objects can: the
// API server's VolumeAttachments, the Node and the pods that wait on a
// volume (failure-cases.md 59 and 60; package kube's Lister is one). Build
// asks it last, with the State as the node showed it (volumes, staging
// mounts and their states final). It returns the findings it could tell
// and the checks it could not; a check whose read failed, was refused or
// was partial gives no finding of its kinds, and says why in its Unknowns.
type ClusterChecker interface {
	CheckCluster(ctx context.Context, st *State) ClusterCheckResult
}

// ClusterCheckResult is what a ClusterChecker found.
type ClusterCheckResult struct {
	Findings []Finding // their Severity is set from their Kind
	// Checked names the checks that completed (e.g. "volumeAttachments").
	Checked []string
	// Unknowns are the checks that could not be done, each with why.
	Unknowns []ClusterUnknown
}

// ClusterUnknown is a check of the cluster that could not be done: its
// findings are unknown, not absent.
type ClusterUnknown struct {
	// Check names the check ("volumeAttachments", "outOfServiceTaint",
	// "volumesNeverStaged").
	Check string `json:"check"`
	// Kinds are the finding kinds the check would have given.
	Kinds []FindingKind `json:"kinds"`
	Error string        `json:"error"`
}

// ClusterChecksInfo says which checks of the cluster's objects the scan
// made (Options.ClusterCheck) and which it could not.
type ClusterChecksInfo struct {
	Checked  []string         `json:"checked,omitempty"`
	Unknowns []ClusterUnknown `json:"unknowns,omitempty"`
}

// noteCluster asks Options.ClusterCheck and records its findings and
// unknowns.
func (b *builder) noteCluster() {
	if b.opts.ClusterCheck == nil {
		return
	}
	res := b.opts.ClusterCheck.CheckCluster(b.ctx, b.st)
	for _, f := range res.Findings {
		b.add(f)
	}
	b.st.ClusterChecks = &ClusterChecksInfo{Checked: res.Checked, Unknowns: res.Unknowns}
	for _, u := range res.Unknowns {
		b.log.V(2).Info("A check of the cluster's objects is unknown: it gives no finding", "check", u.Check, "err", u.Error)
	}
}
