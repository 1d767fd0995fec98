package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// holds lets a test hold a call in flight: while the file <dir>/<Method>
// exists (e.g. NodeStageVolume), a call of that method writes
// <dir>/<Method>.held (the call, as JSON) and waits until the test removes
// <dir>/<Method>, then runs; or, if the test wrote <dir>/<Method>.abort
// before, fails with Aborted without doing anything, as a driver that
// honours its caller's going away. Meanwhile the test kills the kubelet
// or the driver, so the call is in flight at the moment of the fault.
type holds struct{ dir string }

const holdPoll = 20 * time.Millisecond

func (h *holds) wait(c Call) error {
	if h == nil || h.dir == "" {
		return nil
	}
	gate := filepath.Join(h.dir, c.Method)
	if _, err := os.Stat(gate); err != nil {
		return nil
	}
	data, _ := json.Marshal(c)
	if err := os.WriteFile(gate+".held", data, 0o644); err != nil {
		log.Printf("hold %s: %v", c.Method, err)
		return nil
	}
	log.Printf("holding %s %s until %s is removed", c.Method, c.VolumeID, gate)
	for {
		if _, err := os.Stat(gate); err != nil {
			break
		}
		time.Sleep(holdPoll)
	}
	_ = os.Remove(gate + ".held")
	if err := os.Remove(gate + ".abort"); err == nil {
		log.Printf("aborted %s %s", c.Method, c.VolumeID)
		return status.Error(codes.Aborted, "aborted by the test: the caller went away")
	}
	log.Printf("released %s %s", c.Method, c.VolumeID)
	return nil
}
