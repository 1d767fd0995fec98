package cleanup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/volrecon/volrecon/internal/mountid"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// CSIExec configures the calls Execute makes to CSI drivers.
type CSIExec struct {
	// Driver reaches the CSI drivers (csinode.Connector; it bounds each
	// call in time). Without it, every NodeUnpublish and NodeUnstage fails
	// with ErrNoCSIDriverClient and nothing is sent.
	Driver CSIDriverClient
	// ActiveVolumes is asked again right before each NodeUnstage whose plan
	// knew from CSITeardown.ActiveVolumes that no active pod uses the volume
	// (CSICall.RecheckActiveVolumes): a pod may have been bound to the node
	// since, and earlier calls may have taken minutes (kube.Lister's
	// CSIVolumesNow lists the node's pods afresh). A volume it names, an
	// error, or no ActiveVolumes at all, skips the action as Keep.
	ActiveVolumes func(ctx context.Context) ([]string, error)
	// ProcDir is where the node's processes are read, for their mount
	// namespaces, right before each NodeUnstage ("" = Node.HostRoot +
	// /proc, as CSITeardown.ProcDir).
	ProcDir string
}

// callName is the RPC an action kind makes.
func callName(k ActionKind) string {
	if k == NodeUnpublish {
		return "NodeUnpublishVolume"
	}
	return "NodeUnstageVolume"
}

// runCSI carries out a NodeUnpublish or NodeUnstage action: it checks that
// the mount planned is still the one at the path (and, to unstage, that no
// target of the volume is left), finds and asks the driver once, then
// re-reads the mount table and records what changed. A driver error is the
// action's error; nothing else is done for it. A dry run makes the same
// checks, finds the driver and asks it what changes nothing (see
// callDriver), and counts the path unmounted for the actions after it.
func (e *executor) runCSI(a Action) ActionResult {
	r := ActionResult{Action: a}
	if e.opts.CSI.Driver == nil {
		return e.csiStop(a, Failed, fmt.Errorf("%s not called: %w", callName(a.Action), ErrNoCSIDriverClient))
	}
	// Read afresh, before and after: the call is what changes the table.
	table, err := e.opts.MountTable.ReadScoped(e.ctx, e.scope)
	if err != nil {
		return e.csiKeep(a, unreadTable(err))
	}
	if err := e.held.verify(table); err != nil {
		e.halted = err
		return e.csiKeep(a, err)
	}
	if err := e.checkCSI(a, e.view(table)); err != nil {
		if errors.Is(err, ErrNodeChanged) {
			return e.csiKeep(a, err)
		}
		return e.csiStop(a, Failed, err)
	}
	if err := e.stillUnused(a); err != nil {
		return e.csiKeep(a, err)
	}
	err = e.callDriver(a, table, &r)
	if e.dry && err == nil {
		e.gone[a.Path] = true
		r.Result = Done
		return r
	}
	if !e.dry {
		after, readErr := e.opts.MountTable.ReadScoped(e.ctx, e.scope)
		if readErr != nil {
			r.Changed = []string{"the mount table could not be read afterwards: " + readErr.Error()}
		} else {
			r.Changed = mountChange(a.Path, table, after)
		}
		if err == nil && readErr == nil && after.IsMountPoint(a.Path) {
			err = ofKind(ErrStillMounted, fmt.Errorf("%s answered %s without error, yet %s is still mounted", a.CSI.Driver, callName(a.Action), a.Path))
		}
	}
	if err != nil {
		f := e.csiStop(a, Failed, err)
		f.CSICalls, f.Changed = r.CSICalls, r.Changed
		return f
	}
	r.Result = Done
	return r
}

// csiStop is stop for a CSI action: a leaked staging mount belongs to no
// pod, and its failure stops nothing else.
func (e *executor) csiStop(a Action, result Result, err error) ActionResult {
	if a.PodUID != "" {
		return e.stop(a, result, err)
	}
	return ActionResult{Action: a, Result: result, Error: err.Error(), Err: err}
}

// csiKeep is keep for a CSI action.
func (e *executor) csiKeep(a Action, why error) ActionResult {
	if a.PodUID != "" {
		return e.keep(a, why)
	}
	r := ActionResult{Action: a, Result: Skipped, Error: why.Error(), Err: why}
	r.Action.Action = Keep
	r.Reason = why.Error() + " (planned: " + string(a.Action) + ")"
	return r
}

// checkCSI refuses an action whose request is not what the planner makes,
// and skips one whose path changed since the plan.
func (e *executor) checkCSI(a Action, table mountView) error {
	root := filepath.Dir(e.plan.PodsDir)
	switch {
	case a.CSI == nil || a.CSI.Driver == "" || a.CSI.VolumeID == "" || e.plan.PodsDir == "":
		return ofKind(ErrRefused, fmt.Errorf("%s: the action names no driver, volume or pods dir", a.Path))
	case filepath.Clean(a.Path) != a.Path:
		return ofKind(ErrRefused, fmt.Errorf("%s: not a clean path: refused", a.Path))
	case a.Action == NodeUnpublish && !kubelet.IsCSIPublishTarget(e.plan.PodsDir, a.PodUID, a.Path):
		return ofKind(ErrRefused, fmt.Errorf("%s is not a CSI publish target of pod %s: refused", a.Path, a.PodUID))
	case a.Action == NodeUnstage && !kubelet.Root(root).CSIDir().Contains(a.Path):
		return ofKind(ErrRefused, fmt.Errorf("%s is not a CSI staging dir under %s: refused", a.Path, root))
	}
	stack := table.At(a.Path)
	switch {
	case len(a.Mounts) == 0:
		return ofKind(ErrNotJudged, fmt.Errorf("%s: the plan records no mount it judged there (a plan of an older volrecon): plan again", a.Path))
	case len(a.Mounts) != 1:
		return ofKind(ErrRefused, fmt.Errorf("%s: %d mounts judged, the planner judges one", a.Path, len(a.Mounts)))
	case len(stack) != 1:
		return fmt.Errorf("%w: %s has %d mount-table entries, planned with 1", ErrNodeChanged, a.Path, len(stack))
	case mountscan.SubtreeOf(stack[0]) != a.CSI.Source:
		return fmt.Errorf("%w: %s now mounts %s, planned with %s", ErrNodeChanged, a.Path, mountscan.SubtreeOf(stack[0]), a.CSI.Source)
	case !a.Mounts[0].is(stack[0]):
		return fmt.Errorf("%w: the mount at %s is %s now, not %s, the one the plan judged", ErrNodeChanged, a.Path, identityOf(stack[0]), a.Mounts[0])
	}
	if err := e.stillJudged(a.Path, a.Mounts[0], stack[0]); err != nil {
		return err
	}
	for _, m := range table.atOrBelow(a.Path) {
		if m.MountPoint != a.Path {
			return fmt.Errorf("%w: %s is mounted below it", ErrNodeChanged, m.MountPoint)
		}
	}
	if a.Action == NodeUnstage {
		return e.stillNoUser(a, table, stack[0])
	}
	return nil
}

// stillNoUser checks, right before a NodeUnstage, that nothing uses the
// staging mount x, in the host's table read now (usersIn) and then in
// every mount namespace of the node read now (namespaceUser): every mount
// of its filesystem subtree is a user but x, the copies propagation
// proves, the other volumes the plan proved (CSICall.OtherVolumes) and, in
// a dry run, the mounts the actions before would have unmounted and their
// copies. Where the scoped table cannot tell a copy (its parent, or what
// is mounted on it, lies outside the scope), the table is read whole.
func (e *executor) stillNoUser(a Action, view mountView, x mountscan.Mount) error {
	table := view.Table
	users := usersIn(table, x, e.exempt(a, table, x))
	if len(users) > 0 && table.Skipped() > 0 {
		whole, err := e.opts.MountTable.ReadScoped(e.ctx, nil)
		if err != nil {
			return fmt.Errorf("%w: the mount table could not be read whole to tell the copies of %s from its users: %w", ErrNodeChanged, a.Path, err)
		}
		wx, ok := entryOf(whole, a.Path, a.CSI.Source)
		if !ok {
			return fmt.Errorf("%w: %s no longer mounts %s", ErrNodeChanged, a.Path, a.CSI.Source)
		}
		table, x = whole, wx
		users = usersIn(table, x, e.exempt(a, table, x))
	}
	if len(users) > 0 {
		return fmt.Errorf("%w: %s still mounts the staging mount's filesystem subtree (%s): %s",
			ErrNodeChanged, users[0].m.MountPoint, entryText(users[0].m), users[0].why)
	}
	user, err := namespaceUser(e.ctx, e.procDir(), table, x, e.exempt(a, table, x))
	switch {
	case err != nil:
		return fmt.Errorf("%w: the mount namespaces could not all be read again before NodeUnstage: %w", ErrNodeChanged, err)
	case user != "":
		return fmt.Errorf("%w: %s still mounts the staging mount's filesystem subtree", ErrNodeChanged, user)
	}
	return nil
}

// stillJudged checks, where the plan recorded the unique ID of the mount it
// judged, that m, the table's entry read now, is that very mount: the
// judged mount still exists and holds m's mount ID and device (statmount,
// which touches no filesystem). A mount ID and a device given again to a
// mount made since would pass the table's check alone.
func (e *executor) stillJudged(path string, judged MountIdentity, m mountscan.Mount) error {
	if judged.UniqueID == 0 {
		return nil
	}
	if !isOwnMountTable(e.opts.Node) {
		return fmt.Errorf("%w: %s: the plan judged the mount of unique ID %d, which a mount table of another namespace cannot show", ErrNodeChanged, path, judged.UniqueID)
	}
	holds, err := mountid.Holds(judged.UniqueID, m.ID, m.Dev)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: whether the mount there is %s cannot be told: %w", ErrNodeChanged, path, judged, err)
	case !holds:
		return fmt.Errorf("%w: the mount at %s is not %s, the one the plan judged: it was replaced since by a mount with the same ID and device", ErrNodeChanged, path, judged)
	}
	return nil
}

// exempt are the entries of table whose copies are no users of the staging
// mount x: the other volumes the plan proved and, in a dry run, the mounts
// the actions before would have unmounted.
func (e *executor) exempt(a Action, table *mountscan.Table, x mountscan.Mount) []mountscan.Mount {
	exempt := otherVolumeEntries(table, filepath.Dir(e.plan.PodsDir), x, a.CSI.OtherVolumes)
	for p := range e.gone {
		exempt = append(exempt, table.At(p)...)
	}
	return exempt
}

// stillUnused asks CSIExec.ActiveVolumes, before a NodeUnstage, whether a
// pod of the node uses the volume now.
func (e *executor) stillUnused(a Action) error {
	if a.Action != NodeUnstage || !a.CSI.RecheckActiveVolumes {
		return nil
	}
	if e.opts.CSI.ActiveVolumes == nil {
		return fmt.Errorf("%w: which volumes the active pods use cannot be checked again (no CSIExec.ActiveVolumes)", ErrNodeChanged)
	}
	name := kubelet.UniqueVolumeName(a.CSI.Driver, a.CSI.VolumeID)
	names, err := e.opts.CSI.ActiveVolumes(e.ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%w: which volumes the active pods use could not be checked again: %w", ErrNodeChanged, err)
	case slices.Contains(names, name):
		return fmt.Errorf("%w: an active pod on this node uses the volume %s now", ErrNodeChanged, name)
	}
	e.log.V(4).Info("No active pod uses the volume, checked again before NodeUnstage", "uniqueName", name)
	return nil
}

// callDriver finds the driver, asks its capabilities where NodeUnstage
// depends on them, and makes the action's call, once, recording each call.
// Nothing is sent into a mount of table that may hang where the kubelet's
// layout has none (CSIDriverClient.Connect's notEntered). A dry run goes as far
// as the calls that change nothing, GetPluginInfo (Dial) and
// NodeGetCapabilities, and never sends NodeUnpublishVolume or
// NodeUnstageVolume.
func (e *executor) callDriver(a Action, table *mountscan.Table, r *ActionResult) error {
	record := func(call string, err error) {
		res := CSICallResult{Call: call, Result: csiCallResult(err)}
		if err != nil {
			res.Error = err.Error()
		}
		r.CSICalls = append(r.CSICalls, res)
	}
	ctx := e.ctx
	root := filepath.Dir(e.plan.PodsDir)
	c, err := e.opts.CSI.Driver.Connect(ctx, a.CSI.Driver, e.opts.HostRoot, root,
		reconstruct.MountsNotToEnter(table, root, e.plan.PodsDir, kubelet.Root(root).PluginsDir()))
	if err == nil && c == nil {
		err = fmt.Errorf("the CSI driver client gave no connection to %s", a.CSI.Driver)
	}
	if err != nil {
		record(callName(a.Action), err)
		return fmt.Errorf("%s not called: %w", callName(a.Action), err)
	}
	defer c.Close()
	if a.Action == NodeUnstage {
		stageUnstage, err := c.NodeGetCapabilities(ctx)
		record("NodeGetCapabilities", err)
		switch {
		case err != nil:
			return err
		case !stageUnstage:
			return fmt.Errorf("NodeUnstageVolume not called: %w, yet %s is mounted: find out what mounted it", ErrNotStaging, a.Path)
		}
	}
	if e.dry {
		e.would = "(" + a.CSI.Driver + " answers"
		if a.Action == NodeUnstage {
			e.would += " and stages volumes"
		}
		e.would += "; " + callName(a.Action) + " is not sent in a dry run)"
		return nil
	}
	if a.Action == NodeUnstage {
		err = c.NodeUnstageVolume(ctx, a.CSI.VolumeID, a.Path)
		record("NodeUnstageVolume", err)
		return err
	}
	err = c.NodeUnpublishVolume(ctx, a.CSI.VolumeID, a.Path)
	record("NodeUnpublishVolume", err)
	return err
}

// mountChange says how the entries at and below path differ between two
// reads of the mount table.
func mountChange(path string, before, after *mountscan.Table) []string {
	b, a := before.AtOrBelow(path), after.AtOrBelow(path)
	switch {
	case len(b) > 0 && len(a) == 0:
		return []string{path + " unmounted: the mount table has no entry at or below it any more"}
	case len(a) == len(b):
		return []string{"nothing changed at or below " + path + " (" + strconv.Itoa(len(a)) + " entries)"}
	}
	return []string{fmt.Sprintf("entries at or below %s: %d before, %d after", path, len(b), len(a))}
}
