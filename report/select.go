package report

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/reconstruct"
)

// ErrNoSuchPod: a pod named by SelectPods has no pod dir on the node.
var ErrNoSuchPod = errors.New("no pod dir on this node")

// SelectPods resolves refs to the names of pod dirs of st (Pod.UID): each
// ref is a pod dir's name (a UID, or a static pod's config hash) or a
// pod's namespace/name as the active pod list names it (an orphan is
// in no list: name it by UID). The result is sorted; a ref that matches no
// pod dir is an error (ErrNoSuchPod) naming it.
func SelectPods(st *reconstruct.State, refs []string) ([]string, error) {
	var uids, missing []string
	for _, ref := range refs {
		found := false
		for _, p := range st.Pods {
			if strings.EqualFold(p.UID, ref) || p.Name != "" && p.Namespace+"/"+p.Name == ref {
				uids = append(uids, p.UID)
				found = true
			}
		}
		if !found {
			missing = append(missing, ref)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s (a pod is named by its UID, or by namespace/name where the active pod list names it)",
			ErrNoSuchPod, quoteAll(missing))
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

func quoteAll(refs []string) string {
	q := make([]string, len(refs))
	for i, r := range refs {
		q[i] = fmt.Sprintf("%q", r)
	}
	return strings.Join(q, ", ")
}
