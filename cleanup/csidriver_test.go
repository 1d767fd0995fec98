package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
)

// csinode's client is a CSIDriverClient (csinode imports cleanup for its
// one CSIDriverConn; cleanup never imports csinode).
var _ cleanup.CSIDriverClient = csinode.Connector{}

// A plan with a NodeUnpublish, executed with no driver client: the action
// fails saying so, the driver hears nothing, the mount stays, and the
// pod's later actions do not run.
func TestCSIActionsFailWithoutADriverClient(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)
	require.Equal(t, cleanup.NodeUnpublish, csiKindAt(plan, target))

	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.node(), Apply: true})
	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.Equal(t, "NodeUnpublishVolume not called: no CSI driver client configured (cleanup.CSIExec.Driver)", r.Error)
	assert.Empty(t, r.CSICalls, "no call was made")
	assert.Empty(t, n.driver.Calls())
	assert.True(t, n.mounted(target))
	assert.True(t, n.mounted(n.staging))
	assert.Equal(t, cleanup.Skipped, csiResultAt(results, n.staging).Result, "the pod's NodeUnstage waits")
}

// callError is a CSICallError of a client that is not csinode's.
type callError struct {
	msg      string
	timedOut bool
}

func (e callError) Error() string      { return e.msg }
func (e callError) CallTimedOut() bool { return e.timedOut }

// fakeDriverClient is a CSIDriverClient without gRPC: it records what it
// is asked and answers with errs by call ("Connect" too); a call that
// succeeds unmounts its path, as a driver does.
type fakeDriverClient struct {
	n      *csiNode
	errs   map[string]error
	noConn bool // Connect answers neither a connection nor an error
	calls  []string
}

func (f *fakeDriverClient) Connect(_ context.Context, driver, hostRoot, rootDir string, notEntered map[string]string) (cleanup.CSIDriverConn, error) {
	f.calls = append(f.calls, fmt.Sprintf("Connect %s %s %s %v", driver, hostRoot, rootDir, notEntered))
	if err := f.errs["Connect"]; err != nil || f.noConn {
		return nil, err
	}
	return f, nil
}

func (f *fakeDriverClient) NodeGetCapabilities(context.Context) (bool, error) {
	f.calls = append(f.calls, "NodeGetCapabilities")
	return true, f.errs["NodeGetCapabilities"]
}

func (f *fakeDriverClient) NodeUnpublishVolume(_ context.Context, volumeID, path string) error {
	return f.call("NodeUnpublishVolume", volumeID, path)
}

func (f *fakeDriverClient) NodeUnstageVolume(_ context.Context, volumeID, path string) error {
	return f.call("NodeUnstageVolume", volumeID, path)
}

func (f *fakeDriverClient) call(name, volumeID, path string) error {
	f.calls = append(f.calls, name+" "+volumeID+" "+path)
	if err := f.errs[name]; err != nil {
		return err
	}
	f.n.unmount(path)
	return nil
}

func (f *fakeDriverClient) Close() error {
	f.calls = append(f.calls, "Close")
	return nil
}

// Any CSIDriverClient will do: its errors are told apart by CSICallError
// alone, wrapped or not, as ok, error, timeout or unreachable.
func TestCSIResultsComeFromTheClientsTypedErrors(t *testing.T) {
	answered := callError{msg: "NodeUnpublishVolume failed: Internal: device busy"}
	timedOut := callError{msg: "NodeUnpublishVolume failed: DeadlineExceeded", timedOut: true}
	for name, c := range map[string]struct {
		errs   map[string]error
		noConn bool
		result cleanup.Result
		call   cleanup.CSICallResult
	}{
		"ok": {result: cleanup.Done, call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "ok"}},
		"the driver answers an error": {errs: map[string]error{"NodeUnpublishVolume": answered}, result: cleanup.Failed,
			call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "error", Error: answered.msg}},
		"the call times out, wrapped": {errs: map[string]error{"NodeUnpublishVolume": fmt.Errorf("wrapped: %w", timedOut)}, result: cleanup.Failed,
			call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "timeout", Error: "wrapped: " + timedOut.msg}},
		"the driver is not found": {errs: map[string]error{"Connect": errors.New("no endpoint")}, result: cleanup.Failed,
			call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "unreachable", Error: "no endpoint"}},
		"it gives no connection and no error": {noConn: true, result: cleanup.Failed,
			call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "unreachable", Error: "the CSI driver client gave no connection to " + csiDriver}},
		"its identity check times out": {errs: map[string]error{"Connect": timedOut}, result: cleanup.Failed,
			call: cleanup.CSICallResult{Call: "NodeUnpublishVolume", Result: "timeout", Error: timedOut.msg}},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			target := n.publish(csiUID, false)
			client := &fakeDriverClient{n: n, errs: c.errs, noConn: c.noConn}
			results := cleanup.Execute(t.Context(), n.plan(n.teardown(), false),
				cleanup.ExecOptions{Node: n.node(), Apply: true, CSI: cleanup.CSIExec{Driver: client}})
			r := csiResultAt(results, target)
			assert.Equal(t, c.result, r.Result, r.Error)
			assert.Equal(t, []cleanup.CSICallResult{c.call}, r.CSICalls)
			require.NotEmpty(t, client.calls)
			assert.Equal(t, "Connect "+csiDriver+" "+n.hostRoot+" "+csiRoot+" map[]", client.calls[0], "the node's paths reach the client")
			assert.Equal(t, c.result == cleanup.Done, !n.mounted(target))
			assert.Empty(t, n.driver.Calls(), "the gRPC driver is never asked")
		})
	}
}
