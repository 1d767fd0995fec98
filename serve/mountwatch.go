package serve

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/mountscan"
)

// watchEvents starts following the mount table by mount events; tests
// replace it to force each way it fails.
var watchEvents = mountscan.WatchEvents

// mountWatch is how serve follows the mount table between scans: by the
// kernel's mount events where the kernel (Linux 6.15+) and the process's
// privileges (CAP_SYS_ADMIN, over the namespace of the table) allow it,
// so that a scan after a change reads again only the mounts that changed
// and nothing is read while nothing changes; else by the mountinfo file's
// change flag (nodewatch), the table read whole at each scan after a
// change, as before.
type mountWatch struct {
	events *mountscan.EventWatch // nil: by mountinfo
}

// startMountWatch follows src by events if it can, and says which way.
func startMountWatch(ctx context.Context, src mountscan.Source) mountWatch {
	logger := klog.FromContext(ctx)
	events, err := watchEvents(ctx, src)
	if err != nil {
		logger.V(2).Info("Following the mount table by its mountinfo change flag: mount events are not available", "path", src.Name(), "reason", err)
		return mountWatch{}
	}
	return mountWatch{events: events}
}

// beforeScan reads the table whole at a full scan (the safety net: what no
// event tells, a change of propagation alone, shows then), but the first.
func (w mountWatch) beforeScan(full, first bool) {
	if w.events != nil && full && !first {
		w.events.Resync()
	}
}

// current is how the table is followed now (mountscan.WatchFanotify or
// WatchMountinfo): the events stop when listmount and statmount can no
// longer give it.
func (w mountWatch) current() string {
	if w.events != nil {
		return w.events.Method()
	}
	return mountscan.WatchMountinfo
}

func (w mountWatch) close() {
	if w.events != nil {
		w.events.Close()
	}
}
