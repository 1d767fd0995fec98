//go:build unix

package podsdir

import (
	"path/filepath"

	"github.com/volrecon/volrecon/kubelet"
)

// scanCSI scans plugins/kubernetes.io/csi for staging dirs and block specs.
// Staging targets (globalmount, staging/<spec>), map files and publish
// files are recorded from their parent's listing, never looked into. With
// csiReuse the staging dirs and the block dir it holds are taken from the
// earlier Inventory instead of walked.
func (s *scanner) scanCSI() {
	kio := filepath.Dir(s.inv.CSIDir)
	if !s.lookupDir(kio) || !s.lookupDir(s.inv.CSIDir) {
		return
	}
	s.eachSubdir(s.inv.CSIDir, "", func(name, p string) {
		switch name {
		case kubelet.LegacyStagingDirName:
			s.scanStagingParent(p, LayoutLegacy, "")
		case kubelet.BlockDirName:
			if !s.csiReuse.takeBlock(s.inv) {
				s.scanBlockDir(p)
			}
		default:
			// Any other dir is a driver name (current layout).
			s.scanStagingParent(p, LayoutCurrent, name)
		}
	})
}

// scanStagingParent scans pv/ (legacy) or <driver>/ (current): each child
// dir is one staging dir, whatever its name (a current-layout name that is
// not the sha256 of the handle is for the caller to judge).
func (s *scanner) scanStagingParent(dir string, layout Layout, driver string) {
	s.eachSubdir(dir, "", func(name, p string) {
		if !s.csiReuse.take(s.inv, p, layout, driver) {
			s.scanFSStagingDir(p, layout, driver, name)
		}
	})
}

// scanFSStagingDir records one Filesystem staging dir, with or without its
// globalmount (a dir left with only vol_data.json is recorded, Exists false).
func (s *scanner) scanFSStagingDir(dir string, layout Layout, driver, name string) {
	sd := StagingDir{
		Mode:   Filesystem,
		Layout: layout,
		Driver: driver,
		Name:   name,
		Dir:    dir,
		Path:   childPath(dir, kubelet.GlobalMountDirName),
	}
	entries, _ := s.list(dir, "")
	regular := false
	for _, d := range entries {
		switch d.Name() {
		case kubelet.GlobalMountDirName:
			sd.Exists = true
			sd.Type = entryType(d)
			s.expectDir(sd.Path, "", sd.Type) // a staging target is a dir; anything else is reported
		case kubelet.VolDataFileName:
			// Read below, also when the listing failed.
			regular = entryType(d) == TypeFile
		default:
			s.problem(ProblemUnexpected, childPath(dir, d.name), "", "unexpected %s in CSI staging dir", describeType(entryType(d)))
		}
	}
	sd.VolData = s.readVolData(childPath(dir, kubelet.VolDataFileName), "", regular)
	s.inv.Staging = append(s.inv.Staging, sd)
}

// scanBlockDir scans plugins/kubernetes.io/csi/volumeDevices:
//
//	<specName>/dev/<podUID>        map files (bind mounts)
//	<specName>/data/vol_data.json  metadata
//	staging/<specName>             NodeStage target
//	publish/<specName>/<podUID>    NodePublish targets (>= 1.17)
//	publish/<specName>             NodePublish target as a file (< 1.17)
//
// "staging" and "publish" are reserved here. The kubelet's layout is
// ambiguous for a PV literally named "staging" or "publish": its
// <specName> dir is the reserved dir, so its dev/ and data/ are misread as
// the staging or publish entries of specs named "dev" and "data". The
// layout itself cannot tell them apart, so we do not try.
func (s *scanner) scanBlockDir(dir string) {
	specs := map[string]*BlockSpec{}
	hasData := map[string]bool{}
	spec := func(name string) *BlockSpec {
		if bs, ok := specs[name]; ok {
			return bs
		}
		bs := &BlockSpec{SpecName: name, Dir: childPath(dir, name)}
		specs[name] = bs
		return bs
	}
	s.eachSubdir(dir, "", func(name, p string) {
		switch name {
		case kubelet.BlockStagingDirName:
			children, _ := s.list(p, "")
			for _, c := range children {
				e := s.entry(p, "", c)
				spec(c.Name()).Staging = &e
			}
		case kubelet.BlockPublishDirName:
			s.scanBlockPublish(p, spec)
		default:
			hasData[name] = s.scanBlockSpecDir(spec(name))
		}
	})
	for _, bs := range specs {
		// Only through a real <spec>/data dir: O_NOFOLLOW guards the last
		// component alone, and a symlinked dir must not lend another
		// volume's identity.
		bs.VolData = VolData{State: VolDataMissing, Path: filepath.Join(bs.Dir, kubelet.BlockDataDirName, kubelet.VolDataFileName)}
		if hasData[bs.SpecName] {
			bs.VolData = s.readVolData(bs.VolData.Path, "", false) // data/ is not listed
		}
		s.inv.BlockSpecs = append(s.inv.BlockSpecs, *bs)
		if bs.Staging == nil && !hasData[bs.SpecName] {
			continue
		}
		sd := StagingDir{
			Mode:    Block,
			Name:    bs.SpecName,
			Dir:     bs.Dir,
			Path:    filepath.Join(dir, kubelet.BlockStagingDirName, bs.SpecName),
			VolData: bs.VolData,
		}
		if bs.Staging != nil {
			sd.Exists = true
			sd.Type = bs.Staging.Type
		}
		s.inv.Staging = append(s.inv.Staging, sd)
	}
}

// scanBlockPublish scans volumeDevices/publish.
func (s *scanner) scanBlockPublish(dir string, spec func(string) *BlockSpec) {
	children, _ := s.list(dir, "")
	for _, c := range children {
		bs := spec(c.Name())
		if entryType(c) != TypeDir {
			// Before 1.17 publish/<specName> was itself the (file) target.
			e := s.entry(dir, "", c)
			bs.LegacyPublish = &e
			continue
		}
		p := childPath(dir, c.name)
		files, _ := s.list(p, "")
		for _, f := range files {
			bs.Publish = append(bs.Publish, s.entry(p, "", f))
		}
	}
}

// scanBlockSpecDir fills MapFiles from volumeDevices/<specName>/dev and
// reports whether <specName>/data is a directory.
func (s *scanner) scanBlockSpecDir(bs *BlockSpec) (hasData bool) {
	children, _ := s.list(bs.Dir, "")
	for _, c := range children {
		p := childPath(bs.Dir, c.name)
		switch c.Name() {
		case kubelet.BlockMapDirName:
			if !s.expectDir(p, "", entryType(c)) {
				continue
			}
			files, _ := s.list(p, "")
			for _, f := range files {
				bs.MapFiles = append(bs.MapFiles, s.entry(p, "", f))
			}
		case kubelet.BlockDataDirName:
			hasData = s.expectDir(p, "", entryType(c))
		default:
			s.problem(ProblemUnexpected, p, "", "unexpected %s in CSI block volume dir", describeType(entryType(c)))
		}
	}
	return hasData
}
