package reconstruct

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
)

// Scan rebuilds the node's volume state from the kubelet root dir and the
// mount table. It needs no API server, no CSI driver and no plugin
// registration. Its errors:
//   - the kubelet root cannot be used (wrapping a *podsdir.RootError), or
//     the mount table is not the host's (a *NotHostMountTableError, see
//     Node.CheckMountTable): the State is nil;
//   - the mount table could not be read consistently (a *MountTableError:
//     errors.Is(err, ErrMountTable), naming the table and wrapping the
//     cause: a *mountscan.ReadError, mountscan.ErrInconsistent,
//     mountscan.ErrNoRootMount for a table without "/", such as a
//     mount-utils FakeMounter's without mountutil.ForFakeMounter, the error
//     of MountTable.Read): the State is returned with it, every volume
//     Uncertain and held in use, nothing removable. An agent that only
//     checks err must not take it for a clean node;
//   - the pod source answered with an empty list (ErrEmptyActivePods): the
//     State is returned with it, every pod Unknown.
//
// Both of the last two are joined when both. A pod source that fails is
// not an error of Scan: every pod is Unknown, the State says why, and
// State.Err returns it as a typed error (ErrActivePods), as it returns the
// mount table's.
//
// Without Options.LifeChecker no orphan is removable (see Options).
func Scan(ctx context.Context, opts Options) (*State, error) {
	return scan(ctx, opts, nil, Changed{All: true})
}

// scan is Scan, and with in the scan of an Incremental: it walks only what
// changed may name, and keeps the inventory for the next.
func scan(ctx context.Context, opts Options, in *Incremental, changed Changed) (*State, error) {
	opts = opts.withDefaults()
	if err := opts.Node.CheckMountTable(); err != nil {
		return nil, fmt.Errorf("reconstruct: %w", err)
	}
	ctx = WithHungPaths(ctx, opts.HungPaths)
	table := opts.readMountTableDuring(ctx)
	walk := opts.podsdirOptions()
	var early *mountscan.Table
	var dirs []string
	walk.NotEntered, early, dirs = table.notToEnter(ctx, opts) // read before the walk
	walk.Reuse = in.reuse(ctx, walk, walk.NotEntered, early, dirs, changed)
	if walk.Reuse == nil {
		in.dropPrevious() // every pod is walked anew: let the last inventory and the memo go before the walk
	}
	opts.Progress.Send(progress.Report{Step: "reading the kubelet root", Item: opts.RootDir})
	inv, err := podsdir.Scan(ctx, walk)
	if err != nil {
		table.close()
		in.forget()
		return nil, fmt.Errorf("reconstruct: %w", err)
	}
	st, err := build(ctx, opts, inv, table.get, in == nil, in.joinMemo())
	in.keep(inv)
	klog.FromContext(ctx).V(2).Info("Rebuilt node volume state",
		"rootDir", st.ResolvedRootDir, "mountTableConsistent", st.MountTable.Consistent,
		"pods", len(st.Pods), "volumes", len(st.Volumes), "globalMounts", len(st.GlobalMounts),
		"volumesInUse", len(st.VolumesInUse), "findings", len(st.Findings), "incremental", walk.Reuse != nil,
		"keptPods", in.keptPods(), "err", err)
	if err != nil {
		return st, fmt.Errorf("reconstruct: %w", err)
	}
	return st, nil
}

// ErrMountTable is wrapped by every *MountTableError.
var ErrMountTable = errors.New("the mount table could not be read consistently")

// MountTableError says that the mount table at Path could not be read
// consistently, and why (Err: mountscan.ErrInconsistent, a
// *mountscan.ReadError, mountscan.ErrNoRootMount, the error of
// MountTable.Read...). The scan went on: every state is Uncertain.
type MountTableError struct {
	Path string
	Err  error
}

func (e *MountTableError) Error() string {
	return "the mount table " + e.Path + " could not be read consistently: " + e.Err.Error()
}

// Unwrap makes errors.Is(err, ErrMountTable) true, and reaches the cause.
func (e *MountTableError) Unwrap() []error { return []error{ErrMountTable, e.Err} }

// scanErrors are the causes of what the scan could not read, as it met
// them (State.Err).
type scanErrors struct {
	mountTable, activePods error
}

// Err returns what the scan could not read, though it went on, as typed
// errors: a *MountTableError (errors.Is ErrMountTable) when the mount
// table could not be read consistently, a *PodSourceError (errors.Is
// ErrActivePods) when the pod source failed or its answer was refused
// (ErrEmptyActivePods); both joined when both, nil when neither. Each
// wraps the cause as the scan met it, so errors.Is and errors.As reach it
// (mountscan.ErrInconsistent, a *podlist.Error, context.DeadlineExceeded);
// of a State decoded from JSON only the text of the cause is known.
func (st *State) Err() error {
	errs := []error{st.mountTableErr()}
	if st.ActivePods != nil && st.ActivePods.Error != "" {
		errs = append(errs, &PodSourceError{Err: cause(st.errs.activePods, st.ActivePods.Error, "")})
	}
	return errors.Join(errs...)
}

// mountTableErr is the *MountTableError of a State whose mount table could
// not be read consistently, else nil.
func (st *State) mountTableErr() error {
	if st.MountTable.Consistent {
		return nil
	}
	return &MountTableError{Path: st.MountTable.Path, Err: cause(st.errs.mountTable, st.MountTable.Error, "no mount table")}
}

// cause is err, else an error of text (or of alt when text is empty).
func cause(err error, text, alt string) error {
	switch {
	case err != nil:
		return err
	case text != "":
		return errors.New(text)
	}
	return errors.New(alt)
}

// Build joins an inventory of the kubelet root with the mount table, read
// now (through opts.MountTable.Read when set: an agent that holds a table
// passes it there), then asks opts.ActivePods. The table is read after the
// inventory on purpose: the kubelet creates a dir before it mounts on it,
// so every mount made before the read has its dir listed. Its errors are
// Scan's that come with a State (ErrMountTable, ErrEmptyActivePods). Scan
// calls it; agents that gather the inventory
// themselves may too.
func Build(ctx context.Context, opts Options, inv *podsdir.Inventory) (*State, error) {
	opts = opts.withDefaults()
	ctx = WithHungPaths(ctx, opts.HungPaths)
	return build(ctx, opts, inv, opts.MountTable.ReadScoped, false, nil)
}

// build is Build with the mount table from readTable, called after the
// inventory was taken, with the scope of the entries the join asks about.
// With owned (Scan's own inventory, which nobody else sees) the join lets
// each part of inv go once it has used it; with memo (an Incremental's
// scan) it keeps the pods whose inputs are as they were (joinMemo).
func build(ctx context.Context, opts Options, inv *podsdir.Inventory, readTable func(context.Context, *mountscan.Scope) (*mountscan.Table, error),
	owned bool, memo *joinMemo) (*State, error) {
	// A table handed in (MountTable.Read) is held to what a live one is.
	opts.Progress.Send(progress.Report{Step: "reading the mount table", Item: opts.MountTable.Name()})
	table, tableErr := readTable(ctx, tableScope(inventoryDirs(inv), opts.RootDirAliases))
	b := &builder{
		ctx:       ctx,
		log:       klog.FromContext(ctx),
		opts:      opts,
		inv:       inv,
		table:     table,
		globals:   map[string]*GlobalMount{},
		published: map[string]bool{},
		release:   owned,
		memo:      memo,
	}
	b.consistent = tableErr == nil && table != nil
	if memo != nil {
		memo.dataDirs = nil
	}
	b.st = &State{
		SchemaVersion:   SchemaVersion,
		RootDir:         inv.RootDir,
		ResolvedRootDir: inv.ResolvedRootDir,
		PodsDir:         inv.PodsDir,
		RootDirAliases:  slices.Clone(opts.RootDirAliases),
		MountTable:      MountTableInfo{Path: opts.MountTable.Name(), Consistent: b.consistent},
		EvidenceOfLife:  opts.LifeChecker != nil,
	}
	b.noteMountTable(tableErr)
	for _, step := range buildSteps {
		b.log.V(5).Info("Build step", "step", step.name)
		if err := step.run(b); err != nil {
			return nil, err
		}
	}
	return b.st, errors.Join(b.refused, b.st.mountTableErr())
}

// buildSteps are the steps of Build, in order: each uses what the ones
// before it set.
var buildSteps = []struct {
	name string
	run  func(*builder) error
}{
	{"index the mounts under the kubelet's dirs", always((*builder).indexMounts)},
	{"staging (global) mounts, before the pod volumes that refer to them", always((*builder).buildGlobalMounts)},
	{"subtrees shared with staging mounts (bind matching)", always((*builder).buildSubtreesIfConsistent)},
	{"pods and their volumes", always((*builder).buildPods)},
	{"pod statuses, asked only now: a pod created meanwhile is listed", always((*builder).applyActivePods)},
	{"paths that hung: their pods Unknown, their volumes Uncertain", always((*builder).noteHungPaths)},
	{"who uses each staging mount", always((*builder).linkGlobalMountUsers)},
	{"the optional probe of mounted paths", always((*builder).probeIfAsked)},
	{"leaked and inconsistent staging mounts, once their users are known", always((*builder).checkGlobalMounts)},
	{"one device staged as several volumes, once each volume's staging is known", always((*builder).noteSharedDevices)},
	{"deleted, replaced and regular files behind block binds", always((*builder).noteBlockDevices)},
	{"read-write mounts of filesystems the kernel turned read-only", always((*builder).noteReadOnlyFilesystems)},
	{"staging mounts whose block device is gone", always((*builder).noteGoneDevices)},
	{"SELinux labels that the holders of a volume disagree on", always((*builder).noteSELinuxConflicts)},
	{"problems of the inventory", always((*builder).noteProblems)},
	{"stacked mounts", always((*builder).noteStackedMounts)},
	{"orphans, once statuses and mounts are known", always((*builder).noteOrphans)},
	{"loop devices on block map files, once pod statuses are known", always((*builder).scanLoopDevices)},
	{"volumesInUse, from the final volume states", always((*builder).collectVolumesInUse)},
	{"the cluster's objects (Options.ClusterCheck), against the final states", always((*builder).noteCluster)},
	{"let the mount table go: no later step asks it", always((*builder).dropTable)},
	{"sort every list", always(func(b *builder) { b.st.sort() })},
	{"the State's strings become its own", always((*builder).detach)},
}

func always(step func(*builder)) func(*builder) error {
	return func(b *builder) error { step(b); return nil }
}

func (b *builder) indexMounts() {
	if b.consistent {
		b.mounts = newLocalMounts(b.table, b.inv.ResolvedRootDir, b.inv.PodsDir, b.inv.CSIDir)
	}
}

func (b *builder) buildSubtreesIfConsistent() {
	if b.consistent {
		b.buildSubtrees()
	}
}

func (b *builder) probeIfAsked() {
	if b.opts.Probe {
		b.probeMounts()
	}
}

// builder holds one reconstruction pass.
type builder struct {
	ctx        context.Context
	log        klog.Logger
	opts       Options
	inv        *podsdir.Inventory
	table      *mountscan.Table
	consistent bool
	st         *State
	globals    map[string]*GlobalMount // by path
	// published holds the staging paths that some pod mount still uses:
	// a staging mount without one is leaked, even if a pod dir names it.
	published map[string]bool
	// hashMismatch holds the staging paths flagged StagingHashMismatch
	// (checkStagingHash): what they say is no volume's proven identity.
	hashMismatch map[string]bool
	// stagingLeft holds the filesystem staging paths left unmounted with
	// their dir and vol_data.json (noteStagingLeft): not known released.
	stagingLeft map[string]bool

	// Set when the table is consistent: the entries under the kubelet's
	// dirs by path, and who shares a subtree with a staging mount.
	mounts   *localMounts
	subtrees *subtrees
	// rootFS is the entry for the filesystem holding the kubelet root
	// (rootFSOK: one was found), looked up once on first use.
	rootFS               mountscan.Mount
	rootFSOK, rootFSDone bool
	// blockSpecs indexes inv.BlockSpecs by spec name, built on first use.
	blockSpecs map[string]*podsdir.BlockSpec
	// text is what remains of the table once it is let go (dropTable):
	// where its text lies, for detach.
	text mountscan.Text
	// release: inv is the builder's own, and a part of it that no later
	// step reads is dropped once used (the pods with their volumes, the
	// staging dirs), so that it is not live while the State grows.
	release bool
	// memo, in an Incremental's scan, is what the last join made of each
	// pod: a pod whose inputs are as they were is taken from it (joinMemo).
	memo *joinMemo
	// rec records the side effects of building the pod under way.
	rec *recording
	// refused is ErrEmptyActivePods, wrapped, when the pod source's empty
	// answer was refused: Build returns it with the State.
	refused error
}

func (b *builder) noteMountTable(tableErr error) {
	if b.consistent {
		b.st.MountTable.Entries = b.table.Len() + b.table.Skipped()
		b.noteLimitation()
		return
	}
	if tableErr == nil {
		tableErr = fmt.Errorf("no mount table")
	}
	b.st.errs.mountTable = tableErr
	b.st.MountTable.Error = tableErr.Error()
	b.add(Finding{Kind: InconsistentMountTable, Path: b.opts.MountTable.Name(),
		Message: "the mount table could not be read consistently (" + tableErr.Error() +
			"): every volume is Uncertain, held as in use, and nothing may be cleaned up"})
}

// withoutDevice says whether an entry came without major:minor and root
// (mountutil.FromMountPoints): a kernel's table always has a root, "/" at
// least.
func withoutDevice(m mountscan.Mount) bool { return m.Root == "" }

// noteLimitation says in the State when the table's entries have no
// major:minor and root, and what that costs.
func (b *builder) noteLimitation() {
	mounts := b.table.Mounts()
	switch {
	case !slices.ContainsFunc(mounts, withoutDevice):
		return
	case devicesShared(mounts):
		b.st.MountTable.Limitation = "entries without major:minor and root (a mount-utils List), their devices derived from " +
			"their sources (mountutil.WithDevicesFromSources): the entries of one source are taken for views of one filesystem " +
			"at its root, which the kernel's table would prove or refute (a bind of a subdir looks like one of the whole)"
		return
	}
	b.st.MountTable.Limitation = "entries without major:minor and root (a mount-utils List): bind mounts cannot be matched to " +
		"the mounts they show, so no CSI identity is recovered from a staging mount, RootDiskBackedMount cannot be seen, and a " +
		"staging mount used only through binds may be reported as leaked"
}

// devicesShared: two entries without a root share a device number, which
// only a table whose devices were derived from the sources has.
func devicesShared(mounts []mountscan.Mount) bool {
	seen := map[mountscan.DevID]bool{}
	for _, m := range mounts {
		if !withoutDevice(m) {
			continue
		}
		if seen[m.Dev] {
			return true
		}
		seen[m.Dev] = true
	}
	return false
}

// check looks a path up in the mount table.
func (b *builder) check(path string) (VolumeState, *MountRef, string) {
	if !b.consistent {
		return Uncertain, nil, "the mount table could not be read consistently"
	}
	stack := b.mounts.at(path)
	if len(stack) == 1 {
		return Mounted, mountRef(stack), "mount table has 1 entry at the path"
	}
	if len(stack) > 0 {
		return Mounted, mountRef(stack), "mount table has " + plural(len(stack), "entry", "entries") + " at the path"
	}
	if alias, stack := b.atAlias(path); len(stack) > 0 {
		return Mounted, mountRef(stack), "mount table has no entry at the path but " + plural(len(stack), "entry", "entries") +
			" at its alias " + alias + ": the driver mounts under another root dir, so the pod does not see this mount"
	}
	return Unmounted, nil, "no mount-table entry at the path"
}

// atAlias looks a path under the kubelet root up under each root alias.
func (b *builder) atAlias(path string) (string, []mountscan.Mount) {
	for _, alias := range AliasPaths(b.inv.ResolvedRootDir, b.opts.RootDirAliases, path) {
		if stack := b.mounts.at(alias); len(stack) > 0 {
			return alias, stack
		}
	}
	return "", nil
}

// AliasPaths returns where a path under the kubelet root (resolvedRoot) is
// also seen under each of the root's aliases (Options.RootDirAliases); none
// for a path outside the root.
func AliasPaths(resolvedRoot string, aliases []string, path string) []string {
	rel, ok := strings.CutPrefix(path, resolvedRoot+"/")
	if !ok || len(aliases) == 0 {
		return nil
	}
	out := make([]string, 0, len(aliases))
	for _, root := range aliases {
		out = append(out, join(root, rel))
	}
	return out
}

// podMountPoints lists the mount points at or below a pod dir and at or
// below its alias paths: a volume a driver mounted under an alias of the
// root is the pod's mount as much as one under the root.
func (b *builder) podMountPoints(dir string) []string {
	mps := b.table.MountPointsAtOrBelow(dir)
	for _, alias := range AliasPaths(b.inv.ResolvedRootDir, b.opts.RootDirAliases, dir) {
		mps = append(mps, b.table.MountPointsAtOrBelow(alias)...)
	}
	slices.Sort(mps)
	return slices.Compact(mps)
}

// mountedOnlyAtAlias: the kubelet's own path is not a mount point although
// an alias of it is, so anything written to the kubelet's path landed on
// the node's disk.
func (b *builder) mountedOnlyAtAlias(path string) bool {
	if !b.consistent || len(b.mounts.at(path)) > 0 {
		return false
	}
	_, stack := b.atAlias(path)
	return len(stack) > 0
}

func mountRef(stack []mountscan.Mount) *MountRef {
	top := stack[len(stack)-1]
	ref := &MountRef{Source: top.Source, FSType: top.FSType, MajorMinor: top.Dev.String(), Root: top.Root, Count: len(stack), Deleted: top.Deleted}
	if withoutDevice(top) {
		ref.MajorMinor = "" // a number of its own, made up: see mountutil
	}
	ref.SELinuxContext, _ = selinuxContext(top)
	return ref
}

// topMount returns the topmost entry at path, if the table is usable.
func (b *builder) topMount(path string) (mountscan.Mount, bool) {
	if !b.consistent {
		return mountscan.Mount{}, false
	}
	stack := b.mounts.at(path)
	if len(stack) == 0 {
		return mountscan.Mount{}, false
	}
	return stack[len(stack)-1], true
}

// add records a finding of the severity its kind declares (KindInfos).
func (b *builder) add(f Finding) { b.addIn(f, "") }

// addIn records a finding of the severity its kind declares in case c ("":
// the kind's default).
func (b *builder) addIn(f Finding, c SeverityCase) {
	f.Severity = f.Kind.SeverityIn(c)
	if v := b.log.V(4); v.Enabled() {
		v.Info("Finding", "kind", f.Kind, "path", f.Path, "podUID", f.PodUID, "volume", f.Volume)
	}
	b.st.Findings = append(b.st.Findings, f)
}

func (b *builder) buildPods() {
	n := 0
	for _, p := range b.inv.Pods {
		n += len(p.Volumes)
	}
	b.st.Pods = slices.Grow(b.st.Pods, len(b.inv.Pods)) // nil stays nil: no pods
	b.st.Volumes = slices.Grow(b.st.Volumes, n)
	b.memo.begin(b)
	for i := range b.inv.Pods {
		p := &b.inv.Pods[i]
		if pj := b.memo.keep(p); pj != nil {
			b.replay(pj)
			continue
		}
		b.buildPod(p)
		if b.release {
			b.inv.Pods[i] = podsdir.Pod{} // no later step reads the pods
		}
	}
	if b.release {
		b.inv.Pods = nil
	}
	b.memo.finish()
}

// buildPod adds the pod p with its volumes, and records for the next join
// what it made (joinMemo).
func (b *builder) buildPod(p *podsdir.Pod) {
	pod := Pod{UID: p.UID, Path: p.Path, Status: PodUnknown, VolumeCount: len(p.Volumes)}
	if b.consistent {
		pod.MountPoints = b.podMountPoints(p.Path)
	}
	b.st.Pods = append(b.st.Pods, pod)
	vols, finds := len(b.st.Volumes), len(b.st.Findings)
	if b.memo.recording() { // else (Scan, Build, a table not read) nothing is recorded, nor allocated for it
		b.rec = &recording{}
	}
	for _, v := range p.Volumes {
		b.st.Volumes = append(b.st.Volumes, b.volume(v))
	}
	b.memo.record(b, p, vols, finds, b.rec)
	b.rec = nil
}

// podUIDFromPath returns the pod UID of a path under the pods dir.
func (b *builder) podUIDFromPath(p string) (string, bool) {
	rel, ok := strings.CutPrefix(p, b.inv.PodsDir+"/")
	if !ok {
		return "", false
	}
	uid, _, _ := strings.Cut(rel, "/")
	return uid, uid != ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// join is filepath.Join. With a first element (always, here: the paths it
// builds start with a kubelet dir) it is the same as cleaning the elements
// joined by '/', which clean does fast for the paths that are clean already.
func join(elem ...string) string {
	if len(elem) == 0 || elem[0] == "" {
		return filepath.Join(elem...)
	}
	return clean(strings.Join(elem, "/"))
}
