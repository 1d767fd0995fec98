package csinode

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
)

// Errors callers can test with errors.Is.
var (
	// ErrNoEndpoint: no registration socket names the driver and its
	// default socket does not exist.
	ErrNoEndpoint = errors.New("no endpoint of the CSI driver found")
	// ErrNotRunning: the driver's socket exists but nothing answers on it.
	ErrNotRunning = errors.New("the CSI driver is not running")
	// ErrWrongDriver: the endpoint answers as another driver.
	ErrWrongDriver = errors.New("the endpoint belongs to another CSI driver")
	// ErrTimeout: a call did not answer in time; its outcome is unknown.
	ErrTimeout = errors.New("the CSI call timed out, its outcome is unknown")
	// ErrInvalidRequest: a call was refused before it was sent (an empty
	// volume ID, a relative path, a driver name that is not a name).
	ErrInvalidRequest = errors.New("invalid CSI request")
)

// EndpointError says why a driver's endpoint could not be found or reached.
type EndpointError struct {
	Driver string
	// Path is the host path of the socket concerned, if there is one.
	Path string
	// Tried lists what was looked at, for a person.
	Tried []string
	Err   error
}

func (e *EndpointError) Error() string {
	s := "CSI driver " + e.Driver
	if e.Path != "" {
		s += " at " + e.Path
	}
	s += ": " + e.Err.Error()
	if len(e.Tried) > 0 {
		s += fmt.Sprintf(" (tried %q)", e.Tried)
	}
	return s
}

func (e *EndpointError) Unwrap() error { return e.Err }

// CallError is a CSI call that failed: sent and answered with an error, or
// not answered in time.
type CallError struct {
	// Call is the RPC, e.g. "NodeUnpublishVolume".
	Call     string
	Driver   string
	Endpoint string
	// Code and Message are the driver's gRPC status.
	Code    codes.Code
	Message string
	Err     error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("CSI %s to driver %s at %s failed: %s: %s", e.Call, e.Driver, e.Endpoint, e.Code, e.Message)
}

// CallTimedOut says the call was not answered in time (or the driver
// answered DEADLINE_EXCEEDED): its outcome is unknown. With it, a
// *CallError is a cleanup.CSICallError.
func (e *CallError) CallTimedOut() bool { return e.Code == codes.DeadlineExceeded }

// Unwrap returns the gRPC status error and, for a call that timed out,
// ErrTimeout.
func (e *CallError) Unwrap() []error {
	if e.CallTimedOut() {
		return []error{e.Err, ErrTimeout}
	}
	return []error{e.Err}
}
