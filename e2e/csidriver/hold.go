package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"time"
)

// holds lets a test hold a call in flight: while the file <dir>/<Method>
// exists (e.g. NodeStageVolume), a call of that method writes
// <dir>/<Method>.held (the call, as JSON) and waits until the test removes
// <dir>/<Method>, then runs. Meanwhile the test kills the kubelet or the
// driver, so the call is in flight at the moment of the fault.
type holds struct{ dir string }

const holdPoll = 20 * time.Millisecond

func (h *holds) wait(c Call) {
	if h == nil || h.dir == "" {
		return
	}
	gate := filepath.Join(h.dir, c.Method)
	if _, err := os.Stat(gate); err != nil {
		return
	}
	data, _ := json.Marshal(c)
	if err := os.WriteFile(gate+".held", data, 0o644); err != nil {
		log.Printf("hold %s: %v", c.Method, err)
		return
	}
	log.Printf("holding %s %s until %s is removed", c.Method, c.VolumeID, gate)
	for {
		if _, err := os.Stat(gate); err != nil {
			break
		}
		time.Sleep(holdPoll)
	}
	_ = os.Remove(gate + ".held")
	log.Printf("released %s %s", c.Method, c.VolumeID)
}
