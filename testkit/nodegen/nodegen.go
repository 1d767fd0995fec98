package nodegen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
)

// Kind is the kind of one generated pod volume.
type Kind string

// Volume kinds.
const (
	Projected      Kind = "projected"        // kube-api-access-xxxxx service-account token, tmpfs
	Secret         Kind = "secret"           // tmpfs
	EmptyDir       Kind = "empty-dir"        // a plain dir on the node's disk (no mount)
	MemoryEmptyDir Kind = "empty-dir-memory" // emptyDir with medium Memory, tmpfs
	ConfigMap      Kind = "configmap"        // a plain dir, one file of it bound into the container by subPath
	CSI            Kind = "csi"              // PVC staged in the current layout <driver>/<sha256(handle)>/globalmount
	CSISubpath     Kind = "csi-subpath"      // the same, with a dir of it bound into the container by subPath
	CSILegacy      Kind = "csi-legacy"       // PVC staged in the pre-1.24 layout pv/<pv>/globalmount
	CSIBlock       Kind = "csi-block"        // raw block PVC: publish and map files bound from devtmpfs
	CSIEphemeral   Kind = "csi-ephemeral"    // inline ephemeral CSI volume (secrets-store), tmpfs, never staged
)

// DefaultMix is the volumes of a pod, in order; a pod with more volumes
// than the mix cycles through it again.
var DefaultMix = []Kind{Projected, CSI, EmptyDir, ConfigMap, Secret, CSILegacy, CSIBlock, MemoryEmptyDir, CSIEphemeral, CSISubpath}

// CurrentLayoutMix is DefaultMix with the legacy-layout PVC staged in the
// current layout instead: a node that scans with no finding at all (every
// legacy staging dir is a LegacyLayout finding).
var CurrentLayoutMix = []Kind{Projected, CSI, EmptyDir, ConfigMap, Secret, CSI, CSIBlock, MemoryEmptyDir, CSIEphemeral, CSISubpath}

// Drivers and names used on every generated node.
const (
	Driver          = "ebs.csi.aws.com"
	EphemeralDriver = "secrets-store.csi.k8s.io"
	NodeName        = "ip-10-0-1-23.ec2.internal"
	// MountInfoFile is where the mount table is written, relative to the
	// host root (outside the kubelet root, so a scan never lists it).
	MountInfoFile = "proc/1/mountinfo"
)

// Config says what to generate.
type Config struct {
	Pods          int    // pod dirs
	VolumesPerPod int    // volumes in each pod (0 = len(Mix))
	Mix           []Kind // the kinds of a pod's volumes, in order (nil = DefaultMix)
	// MountInfoLines pads the mount table to this many lines with
	// container overlay, shm and cgroup entries. A node that needs more
	// lines gets no padding.
	MountInfoLines int
	RootDir        string // the kubelet root as a host path ("" = kubelet.DefaultRootDir)
}

// Volume is one generated pod volume, as a correct scan must see it.
type Volume struct {
	PodUID string
	Name   string
	Kind   Kind
	Plugin string // unescaped, e.g. kubernetes.io/csi
	Block  bool   // volumeMode Block (a map file under volumeDevices/)
	// CheckedPath is the host path whose mount-table entry decides the
	// volume's state: the volume dir, <dir>/mount for CSI, the publish
	// file for CSI block.
	CheckedPath string
	Mounted     bool // the mount table has an entry at CheckedPath
}

// Node is a generated node and what a scan must find on it.
type Node struct {
	HostRoot      string // the dir everything was written under (reconstruct.Options.HostRoot)
	RootDir       string // the kubelet root as a host path (reconstruct.Options.RootDir)
	MountInfoPath string // the mount table as a real path (reconstruct.Options.MountInfoPath)
	MountInfo     []byte // its content
	MountLines    int    // its number of lines (entries)

	PodUIDs      []string // sorted
	Volumes      []Volume // by pod, in mix order
	GlobalMounts int      // CSI staging dirs: current, legacy and block
	// LegacyGlobalMounts is how many of them are in the pre-1.24 layout
	// (each is a LegacyLayout finding).
	LegacyGlobalMounts int

	// Dirs are the real paths (under HostRoot) of every directory a scan
	// lists, and VolDataFiles of every vol_data.json it reads: the I/O a
	// scan cannot avoid, sorted.
	Dirs         []string
	VolDataFiles []string
}

// Mounted returns how many volumes the mount table has an entry for.
func (n *Node) Mounted() int {
	c := 0
	for _, v := range n.Volumes {
		if v.Mounted {
			c++
		}
	}
	return c
}

// Mount-table constants.
const (
	rootID      = 22 // the root filesystem's mount ID
	runID       = 28 // /run's mount ID
	firstID     = 100
	rootDev     = "259:1"
	rootSource  = "/dev/nvme0n1p1"
	shimDir     = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
	sandboxDir  = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes"
	snapshotDir = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
	devtmpfsOpt = "rw,size=4017584k,nr_inodes=1004396,mode=755"
	tmpfsOpt    = "rw,size=15943656k,inode64,noswap"
)

// baseMounts are the system entries every node has, before any pod.
var baseMounts = []string{
	"22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,discard,errors=remount-ro",
	"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
	"24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw",
	"25 22 0:5 / /dev rw,nosuid shared:8 - devtmpfs devtmpfs " + devtmpfsOpt,
	"26 25 0:24 / /dev/shm rw,nosuid,nodev shared:9 - tmpfs tmpfs rw,inode64",
	"27 25 0:25 / /dev/pts rw,nosuid,noexec,relatime shared:10 - devpts devpts rw,gid=5,mode=620,ptmxmode=000",
	"28 22 0:26 / /run rw,nosuid,nodev shared:13 - tmpfs tmpfs rw,size=1617196k,mode=755,inode64",
	"29 24 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:3 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
	"30 24 0:7 / /sys/kernel/security rw,nosuid,nodev,noexec,relatime shared:4 - securityfs securityfs rw",
	"31 24 0:28 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:5 - pstore pstore rw",
	"32 24 0:29 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:6 - bpf bpf rw,mode=700",
	"33 23 0:30 / /proc/sys/fs/binfmt_misc rw,relatime shared:14 - autofs systemd-1 rw,fd=29,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=15342",
	"34 25 0:20 / /dev/mqueue rw,nosuid,nodev,noexec,relatime shared:15 - mqueue mqueue rw",
	"35 24 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:16 - tracefs tracefs rw",
	"36 24 0:6 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:17 - debugfs debugfs rw",
	"37 22 259:2 / /boot/efi rw,relatime shared:30 - vfat /dev/nvme0n1p15 rw,fmask=0077,dmask=0077,codepage=437,iocharset=iso8859-1,shortname=mixed,errors=remount-ro",
	"38 24 0:31 / /sys/fs/fuse/connections rw,nosuid,nodev,noexec,relatime shared:18 - fusectl fusectl rw",
	"39 24 0:32 / /sys/kernel/config rw,nosuid,nodev,noexec,relatime shared:19 - configfs configfs rw",
}

// podLines is how many mount-table entries a pod adds besides its volumes:
// the sandbox's shm, the pause container's rootfs and the app container's.
const podLines = 3

// kindLines is how many mount-table entries a volume of each kind adds.
var kindLines = map[Kind]int{
	Projected: 1, Secret: 1, EmptyDir: 0, MemoryEmptyDir: 1, ConfigMap: 1,
	CSI: 2, CSISubpath: 3, CSILegacy: 2, CSIBlock: 2, CSIEphemeral: 1,
}

// gen holds one generation.
type gen struct {
	cfg      Config
	node     *Node
	mi       bytes.Buffer
	lines    int
	nextID   int
	nextPeer int
	nextAnon int // minor of anonymous (0:N) devices
	nextDisk int // minor of the PVCs' disks (259:N)
	nextPV   int
	nextCtr  int
	dirs     map[string]bool // kubelet dirs a scan lists (host paths)
}

// Generate writes a node under hostRoot (created if need be) and returns it.
func Generate(hostRoot string, cfg Config) (*Node, error) {
	if cfg.Pods < 0 || cfg.VolumesPerPod < 0 || cfg.MountInfoLines < 0 {
		return nil, errors.New("nodegen: negative size")
	}
	if cfg.Mix == nil {
		cfg.Mix = DefaultMix
	}
	if len(cfg.Mix) == 0 {
		return nil, errors.New("nodegen: empty mix")
	}
	for _, k := range cfg.Mix {
		if _, ok := kindLines[k]; !ok {
			return nil, fmt.Errorf("nodegen: unknown volume kind %q", k)
		}
	}
	if cfg.VolumesPerPod == 0 {
		cfg.VolumesPerPod = len(cfg.Mix)
	}
	if cfg.RootDir == "" {
		cfg.RootDir = kubelet.DefaultRootDir
	}
	if !filepath.IsAbs(cfg.RootDir) {
		return nil, errors.New("nodegen: RootDir must be absolute")
	}
	g := &gen{
		cfg:      cfg,
		node:     &Node{HostRoot: hostRoot, RootDir: filepath.Clean(cfg.RootDir)},
		nextID:   firstID,
		nextPeer: 200,
		nextAnon: 60,
		nextDisk: 16,
		dirs:     map[string]bool{},
	}
	if err := g.generate(); err != nil {
		return nil, fmt.Errorf("nodegen: %w", err)
	}
	return g.node, nil
}

func (g *gen) generate() error {
	n := g.node
	if err := g.kubeletRoot(); err != nil {
		return err
	}
	for _, l := range baseMounts {
		g.mi.WriteString(l)
		g.mi.WriteByte('\n')
		g.lines++
	}
	perPod := podLines
	for j := range g.cfg.VolumesPerPod {
		perPod += kindLines[g.kind(j)]
	}
	padding := max(0, g.cfg.MountInfoLines-g.lines-perPod*g.cfg.Pods)
	padded := 0
	for i := range g.cfg.Pods {
		if err := g.pod(i); err != nil {
			return err
		}
		// Spread the padding between the pods, as containers come and go.
		want := padding * (i + 1) / g.cfg.Pods
		g.pad(want-padded, i)
		padded = want
	}
	g.pad(padding-padded, 0)
	if want := max(g.cfg.MountInfoLines, len(baseMounts)+perPod*g.cfg.Pods); g.lines != want {
		return fmt.Errorf("internal error: %d mount-table lines, want %d", g.lines, want)
	}

	n.MountInfo = g.mi.Bytes()
	n.MountLines = g.lines
	n.MountInfoPath = n.host(MountInfoFile)
	if err := writeFile(n.MountInfoPath, n.MountInfo); err != nil {
		return err
	}
	for d := range g.dirs {
		n.Dirs = append(n.Dirs, n.host(d))
	}
	slices.Sort(n.Dirs)
	slices.Sort(n.VolDataFiles)
	slices.Sort(n.PodUIDs)
	return nil
}

func (g *gen) kind(j int) Kind { return g.cfg.Mix[j%len(g.cfg.Mix)] }

// host returns the real path of host path p.
func (n *Node) host(p string) string { return kubelet.NewHost(n.HostRoot).Path(p) }

// kubeletRoot writes what a kubelet root holds besides pods and volumes.
func (g *gen) kubeletRoot() error {
	r := g.node.RootDir
	layout := kubelet.Root(r)
	for _, d := range []string{layout.PodsDir(), filepath.Join(r, "pki"), filepath.Join(r, "device-plugins"),
		filepath.Join(r, "pod-resources"), layout.DriverDir(Driver), layout.RegistryDir()} {
		if err := g.mkdir(d); err != nil {
			return err
		}
	}
	for p, content := range map[string]string{
		"cpu_manager_state":                          `{"policyName":"none","defaultCpuSet":"","checksum":1353318690}`,
		"memory_manager_state":                       `{"policyName":"None","machineState":{},"checksum":1712356262}`,
		"device-plugins/kubelet_internal_checkpoint": `{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1780653234}`,
	} {
		if err := g.file(filepath.Join(r, p), content); err != nil {
			return err
		}
	}
	for _, p := range []string{filepath.Join(layout.RegistryDir(), Driver+"-reg.sock"), layout.DriverSocket(Driver)} {
		if err := g.file(p, ""); err != nil {
			return err
		}
	}
	g.dirs[layout.PodsDir()] = true
	return nil
}

// pod writes pod number i with its volumes.
func (g *gen) pod(i int) error {
	uid := uuid("pod", i)
	g.node.PodUIDs = append(g.node.PodUIDs, uid)
	dir := kubelet.Root(g.node.RootDir).PodDir(uid)
	g.dirs[dir] = true
	sandbox := hexID("sandbox", i)
	g.mount(runID, g.anon(), "/", sandboxDir+"/"+sandbox+"/shm", "rw,nosuid,nodev,noexec,relatime", g.peer(), "tmpfs", "shm", "rw,size=65536k,inode64")
	g.overlay(sandbox, 1)
	for _, f := range []string{kubelet.EtcHostsFileName, filepath.Join(kubelet.ContainersDirName, "app", hexID("restart", i)[:8])} {
		if err := g.file(filepath.Join(dir, f), ""); err != nil {
			return err
		}
	}
	seen := map[Kind]int{}
	for j := range g.cfg.VolumesPerPod {
		k := g.kind(j)
		name := volumeName(k, i, j, seen[k])
		seen[k]++
		if err := g.volume(uid, dir, k, name); err != nil {
			return err
		}
	}
	g.overlay(hexID("app", i), 3+i%10)
	return nil
}

// volume writes one volume of pod uid and its mounts.
func (g *gen) volume(uid, podDir string, k Kind, name string) error {
	v := Volume{PodUID: uid, Name: name, Kind: k, Plugin: "kubernetes.io/" + string(k), Mounted: true}
	inTree := func(plugin string) string {
		v.Plugin = "kubernetes.io/" + plugin
		v.CheckedPath = kubelet.Root(g.node.RootDir).VolumeDir(uid, v.Plugin, name)
		g.dirs[filepath.Join(podDir, kubelet.VolumesDirName)] = true
		g.dirs[filepath.Dir(v.CheckedPath)] = true
		return v.CheckedPath
	}
	var err error
	switch k {
	case Projected:
		p := inTree("projected")
		g.tmpfs(p)
		err = errors.Join(g.mkdir(p), g.file(filepath.Join(podDir, kubelet.PodPluginsDirName, kubelet.EscapePluginName(kubelet.EmptyDirPluginName), "wrapped_"+name, kubelet.ReadyFileName), ""))
	case Secret:
		p := inTree("secret")
		g.tmpfs(p)
		err = g.mkdir(p)
	case MemoryEmptyDir:
		p := inTree("empty-dir")
		g.tmpfs(p)
		err = g.mkdir(p)
	case EmptyDir:
		p := inTree("empty-dir")
		v.Mounted = false
		err = g.file(filepath.Join(p, "data.bin"), "cache")
	case ConfigMap:
		p := inTree("configmap")
		v.Mounted = false
		err = g.configMap(p, podDir, name)
	case CSI, CSISubpath, CSILegacy, CSIEphemeral:
		err = g.csiFilesystem(&v, podDir)
	case CSIBlock:
		err = g.csiBlock(&v, podDir)
	}
	g.node.Volumes = append(g.node.Volumes, v)
	return err
}

// configMap writes a configMap volume as the kubelet's atomic writer does
// (a timestamped dir, ..data and per-key symlinks) and binds one key into
// the container by subPath.
func (g *gen) configMap(p, podDir, name string) error {
	ts := "..2025_01_17_09_30_00.1234567890"
	target := filepath.Join(podDir, kubelet.VolumeSubpathsDirName, name, "app", "0")
	g.subpathDirs(podDir, name)
	g.mount(rootID, rootDev, filepath.Join(p, ts, "app.yaml"), target, "rw,relatime", "shared:1", "ext4", rootSource, "rw,discard,errors=remount-ro")
	return errors.Join(
		g.file(filepath.Join(p, ts, "app.yaml"), "key: value\n"),
		g.symlink(filepath.Join(p, "..data"), ts),
		g.symlink(filepath.Join(p, "app.yaml"), "..data/app.yaml"),
		g.file(target, ""),
	)
}

func (g *gen) subpathDirs(podDir, volume string) {
	subpaths := filepath.Join(podDir, kubelet.VolumeSubpathsDirName)
	g.dirs[subpaths] = true
	g.dirs[filepath.Join(subpaths, volume)] = true
	g.dirs[filepath.Join(subpaths, volume, "app")] = true
}

// csiFilesystem writes a CSI Filesystem volume: pods/<uid>/volumes/kubernetes.io~csi/<pv>/{mount,vol_data.json},
// and for a PVC its staging dir with its own vol_data.json.
func (g *gen) csiFilesystem(v *Volume, podDir string) error {
	layout := kubelet.Root(g.node.RootDir)
	v.Plugin = kubelet.CSIPluginName
	volDir := layout.VolumeDir(v.PodUID, v.Plugin, v.Name)
	v.CheckedPath = layout.CSIPublishTarget(v.PodUID, v.Name)
	g.dirs[filepath.Join(podDir, kubelet.VolumesDirName)] = true
	g.dirs[filepath.Dir(volDir)] = true
	g.dirs[volDir] = true
	if v.Kind == CSIEphemeral {
		g.tmpfs(v.CheckedPath)
		return errors.Join(g.mkdir(v.CheckedPath), g.volData(layout.PodVolDataPath(v.PodUID, v.Name), map[string]string{
			"driverName": EphemeralDriver, "nodeName": NodeName, "specVolID": v.Name,
			"volumeHandle":        "csi-" + hexID("ephemeral", v.PodUID+"/"+v.Name),
			"volumeLifecycleMode": "Ephemeral",
		}))
	}
	handle := g.handle()
	csiDir := layout.CSIDir()
	g.dirs[string(csiDir)] = true
	staging := csiDir.StagingPath(Driver, handle)
	if v.Kind == CSILegacy {
		staging = csiDir.LegacyStagingPath(v.Name)
		g.node.LegacyGlobalMounts++
	}
	stagingDir := filepath.Dir(staging)
	g.dirs[filepath.Dir(stagingDir)] = true
	g.dirs[stagingDir] = true
	g.node.GlobalMounts++
	dev, src, peer := g.disk()
	g.mount(rootID, dev, "/", staging, "rw,relatime", peer, "ext4", src, "rw")
	g.mount(rootID, dev, "/", v.CheckedPath, "rw,relatime", peer, "ext4", src, "rw")
	err := errors.Join(
		g.mkdir(staging), g.mkdir(v.CheckedPath),
		g.volData(filepath.Join(stagingDir, kubelet.VolDataFileName), map[string]string{"driverName": Driver, "volumeHandle": handle}),
		g.volData(layout.PodVolDataPath(v.PodUID, v.Name), map[string]string{
			"attachmentID": "csi-" + hexID("attach", handle), "driverName": Driver, "nodeName": NodeName,
			"specVolID": v.Name, "volumeHandle": handle, "volumeLifecycleMode": "Persistent",
		}),
	)
	if v.Kind == CSISubpath {
		target := layout.SubpathTarget(v.PodUID, v.Name, "app", "1")
		g.subpathDirs(podDir, v.Name)
		g.mount(rootID, dev, "/app/data", target, "rw,relatime", peer, "ext4", src, "rw")
		err = errors.Join(err, g.mkdir(target))
	}
	return err
}

// csiBlock writes a CSI raw block volume: the pod's map file (a symlink to
// the publish file), the publish and global map files bound from the
// device node, the staging dir and data/vol_data.json.
func (g *gen) csiBlock(v *Volume, podDir string) error {
	v.Plugin, v.Block = kubelet.CSIPluginName, true
	handle := g.handle()
	layout := kubelet.Root(g.node.RootDir)
	csiDir := layout.CSIDir()
	devices := csiDir.BlockDir()
	publish := csiDir.BlockPublishPath(v.Name, v.PodUID)
	mapFile := csiDir.BlockMapFile(v.Name, v.PodUID)
	podMapFile := layout.BlockVolumePath(v.PodUID, v.Plugin, v.Name)
	staging := csiDir.BlockStagingPath(v.Name)
	v.CheckedPath = publish
	for _, d := range []string{filepath.Dir(filepath.Dir(podMapFile)), filepath.Dir(podMapFile),
		filepath.Dir(devices), devices, filepath.Dir(staging), filepath.Dir(filepath.Dir(publish)), filepath.Dir(publish),
		csiDir.BlockSpecDir(v.Name), filepath.Dir(mapFile)} {
		g.dirs[d] = true
	}
	g.node.GlobalMounts++
	g.nextDisk++
	disk := "/nvme" + strconv.Itoa(g.nextDisk) + "n1"
	g.mount(25, "0:5", disk, publish, "rw,nosuid", "shared:8", "devtmpfs", "devtmpfs", devtmpfsOpt)
	g.mount(25, "0:5", disk, mapFile, "rw,nosuid", "shared:8", "devtmpfs", "devtmpfs", devtmpfsOpt)
	return errors.Join(
		g.symlink(podMapFile, publish),
		g.file(publish, ""), g.file(mapFile, ""),
		g.mkdir(staging),
		g.volData(csiDir.BlockVolDataPath(v.Name), map[string]string{
			"attachmentID": "csi-" + hexID("attach", handle), "driverName": Driver, "nodeName": NodeName,
			"specVolID": v.Name, "volumeHandle": handle,
		}),
	)
}

// handle returns the next PVC's volume handle (EBS-like: vol- and 17 hex digits).
func (g *gen) handle() string {
	g.nextPV++
	return "vol-0" + hexID("handle", g.nextPV)[:16]
}

// disk returns the device, source and peer group of the next PVC's disk.
func (g *gen) disk() (dev, source, peer string) {
	g.nextDisk++
	return "259:" + strconv.Itoa(g.nextDisk), "/dev/nvme" + strconv.Itoa(g.nextDisk) + "n1", g.peer()
}

func (g *gen) tmpfs(p string) {
	g.mount(rootID, g.anon(), "/", p, "rw,relatime", g.peer(), "tmpfs", "tmpfs", tmpfsOpt)
}

// overlay adds a container's rootfs with its image layers.
func (g *gen) overlay(containerID string, layers int) int {
	g.nextCtr++
	var opts strings.Builder
	opts.WriteString("rw,relatime,lowerdir=")
	snap := g.nextCtr * 16
	for l := range layers {
		if l > 0 {
			opts.WriteByte(':')
		}
		fmt.Fprintf(&opts, "%s/%d/fs", snapshotDir, snap+l)
	}
	fmt.Fprintf(&opts, ",upperdir=%s/%d/fs,workdir=%s/%d/work,uuid=on", snapshotDir, snap+layers, snapshotDir, snap+layers)
	return g.mount(runID, g.anon(), "/", shimDir+"/"+containerID+"/rootfs", "rw,relatime", g.peer(), "overlay", "overlay", opts.String())
}

// pad adds n lines of container churn: sidecar and job containers' rootfs
// overlays and the cgroup2 mounts that nested runtimes show.
func (g *gen) pad(n, pod int) {
	for n > 0 {
		c := g.nextCtr
		cid := hexID("pad", c)
		id := g.overlay(cid, 1+c%12)
		n--
		if n == 0 {
			return
		}
		slice := "kubepods-burstable-pod" + strings.ReplaceAll(uuid("pod", pod), "-", "_") + ".slice"
		g.mount(id, "0:27", "/kubepods.slice/kubepods-burstable.slice/"+slice+"/cri-containerd-"+cid+".scope",
			shimDir+"/"+cid+"/rootfs/sys/fs/cgroup", "ro,nosuid,nodev,noexec,relatime", "", "cgroup2", "cgroup", "rw,nsdelegate,memory_recursiveprot")
		n--
	}
}

// mount appends one mountinfo line and returns its mount ID.
func (g *gen) mount(parent int, dev, root, mountPoint, opts, optional, fsType, source, superOpts string) int {
	id := g.nextID
	g.nextID++
	b := &g.mi
	b.WriteString(strconv.Itoa(id))
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(parent))
	for _, f := range []string{dev, root, mountPoint, opts} {
		b.WriteByte(' ')
		b.WriteString(f)
	}
	if optional != "" {
		b.WriteByte(' ')
		b.WriteString(optional)
	}
	for _, f := range []string{"-", fsType, source, superOpts} {
		b.WriteByte(' ')
		b.WriteString(f)
	}
	b.WriteByte('\n')
	g.lines++
	return id
}

func (g *gen) anon() string {
	g.nextAnon++
	return "0:" + strconv.Itoa(g.nextAnon)
}

func (g *gen) peer() string {
	g.nextPeer++
	return "shared:" + strconv.Itoa(g.nextPeer)
}

// File-system helpers; p is a host path.

func (g *gen) mkdir(p string) error { return os.MkdirAll(g.node.host(p), 0o750) }

func (g *gen) file(p, content string) error { return writeFile(g.node.host(p), []byte(content)) }

func (g *gen) symlink(p, target string) error {
	if err := os.MkdirAll(filepath.Dir(g.node.host(p)), 0o750); err != nil {
		return err
	}
	return os.Symlink(target, g.node.host(p))
}

// volData writes a vol_data.json with the keys in sorted order, as the kubelet does.
func (g *gen) volData(p string, fields map[string]string) error {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k) + ":" + strconv.Quote(fields[k]))
	}
	b.WriteByte('}')
	g.node.VolDataFiles = append(g.node.VolDataFiles, g.node.host(p))
	return g.file(p, b.String())
}

func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

// Names. They are derived from hashes of the indexes, so they look random
// but are the same on every run.

func digest(kind string, i any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(kind, "/", i)))
	return hex.EncodeToString(sum[:])
}

// uuid returns an RFC 4122-shaped version 4 UUID.
func uuid(kind string, i int) string {
	h := digest(kind, i)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// hexID returns 64 hex digits, like a container ID.
func hexID(kind string, i any) string { return digest(kind, i) }

// volumeName names volume j of pod, the nth of its kind in the pod.
func volumeName(k Kind, pod, j, nth int) string {
	suffix := ""
	if nth > 0 {
		suffix = "-" + strconv.Itoa(nth+1)
	}
	switch k {
	case Projected:
		const letters = "bcdfghjklmnpqrstvwxz2456789" // the API server's random-suffix alphabet
		h := digest("token", fmt.Sprint(pod, "/", nth))
		var s [5]byte
		for i := range s {
			s[i] = letters[int(h[i])%len(letters)]
		}
		return "kube-api-access-" + string(s[:])
	case Secret:
		return "tls" + suffix
	case EmptyDir:
		return "cache" + suffix
	case MemoryEmptyDir:
		return "shm" + suffix
	case ConfigMap:
		return "config" + suffix
	case CSIEphemeral:
		return "secrets-store" + suffix
	}
	return "pvc-" + uuid("pv", pod<<16|j)
}

// BenchConfig is the synthetic node of the memory benchmarks: pods × 10
// volumes and a 30,000-line mount table, as in reconstruct's BenchmarkScan.
func BenchConfig(pods int) Config {
	return Config{Pods: pods, VolumesPerPod: 10, MountInfoLines: 30_000}
}
