package serve

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/reconstruct"
)

// apiWatch is serve's view of the API server: a pod watch that decides when
// its answers are trusted, and what it may write there.
type apiWatch struct {
	watcher   *kube.Watcher
	events    *kube.Events              // nil without API.Events
	condition *kube.NodeConditionWriter // nil without API.NodeStatus
}

// startAPIWatch starts the pod watch of Config.API, which the scans then
// read the active pods from: serve watches instead of listing at every
// scan. It is trusted for max(3 intervals, kube.DefaultStaleAfter) without
// word from the API server, the interval being the recheck interval with
// Watch (3 rechecks), else Interval.
func (s *Server) startAPIWatch(ctx context.Context) error {
	api, interval := s.cfg.API, s.cfg.Interval
	if s.loop != nil {
		interval = s.cfg.RecheckInterval
	}
	w := &apiWatch{watcher: kube.NewWatcher(api.Client, api.NodeName,
		kube.WatcherOptions{StaleAfter: max(3*interval, kube.DefaultStaleAfter), PageSize: api.PageSize, OnChange: s.notify})}
	go w.watcher.Run(ctx)
	if api.Events {
		w.events = kube.NewEvents(ctx, api.Client, api.NodeName)
	}
	if api.NodeStatus != nil {
		// The first scan comes before the pod watch has synced, the next
		// one an interval later: no Unknown before that.
		w.condition = kube.NewNodeConditionWriter(api.NodeStatus, api.NodeName, kube.NodeConditionOptions{UnknownGrace: 2*interval + 10*time.Second})
		go w.condition.Run(ctx)
	}
	klog.FromContext(ctx).V(2).Info("Watching the node's pods", "node", api.NodeName, "events", api.Events, "nodeCondition", api.NodeStatus != nil)
	s.api = w
	s.opts.ActivePods = w.watcher
	return nil
}

// attachFree returns the attach-free CSI drivers for the next scan: those
// named by the operator and those the CSIDriver watch knows.
func (w *apiWatch) attachFree(named []string) []string {
	if w == nil {
		return named
	}
	return append(slices.Clone(named), w.watcher.AttachFreeDrivers()...)
}

// afterScan publishes the findings of a scan as Events, and its outcome as
// the Node condition, when asked; err is the scan's, st nil when it failed.
// Neither waits on the API server.
func (w *apiWatch) afterScan(ctx context.Context, st *reconstruct.State, err error) {
	if w == nil {
		return
	}
	if w.events != nil && st != nil && err == nil {
		w.events.Publish(ctx, st)
	}
	if w.condition != nil {
		w.condition.Observe(st, err)
	}
}

// healthDetail says whether the API server's answers are trusted, for /healthz.
func (w *apiWatch) healthDetail() string {
	if w == nil {
		return ""
	}
	s := w.watcher.Status()
	if s.Trusted {
		return fmt.Sprintf("active pods: from the API server, trusted (last contact %s)", s.LastContact.Format(time.RFC3339))
	}
	return "active pods: from the API server, NOT trusted, every pod is Unknown: " + s.Reason
}

func (w *apiWatch) stop() {
	if w != nil && w.events != nil {
		w.events.Shutdown()
	}
}
