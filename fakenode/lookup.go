package fakenode

import (
	"testing"

	"github.com/volrecon/volrecon/reconstruct"
)

// VolumeNamed returns the volume name of pod uid, failing the test without one.
func VolumeNamed(tb testing.TB, st *reconstruct.State, uid, name string) reconstruct.Volume {
	tb.Helper()
	for _, v := range st.Volumes {
		if v.PodUID == uid && v.Name == name {
			return v
		}
	}
	tb.Fatalf("no volume %s of pod %s", name, uid)
	return reconstruct.Volume{}
}

// FindingsOf returns the findings of a kind.
func FindingsOf(st *reconstruct.State, kind reconstruct.FindingKind) []reconstruct.Finding {
	var out []reconstruct.Finding
	for _, f := range st.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}
