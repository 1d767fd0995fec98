package kube

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// DefaultPageSize is how many objects one page of a list asks for (the
// limit parameter), as client-go's pager asks.
const DefaultPageSize = 500

const (
	// maxPages bounds the pages of one list: at DefaultPageSize, far more
	// than any node's pods, so only a server that pages without end or
	// ignores the limit for tiny pages reaches it.
	maxPages = 100
	// maxListAttempts bounds the restarts of a list whose continue token
	// expired (410 Gone) before its last page.
	maxListAttempts = 3
)

// IncompleteListError: the pages of a list of Resource do not make one
// whole answer, for Reason (a continue token that expired every time, a
// page of another resource version, items said to remain with no way to
// get them, too many pages). Err is the API server's error, if any. The
// answer is unknown: a partial list is never taken for the whole one.
type IncompleteListError struct {
	Resource string
	Reason   string
	Err      error
}

func (e *IncompleteListError) Error() string {
	s := "the list of " + e.Resource + " is incomplete: " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *IncompleteListError) Unwrap() error { return e.Err }

// pageFunc lists one page: its items and its ListMeta.
type pageFunc[T any] func(ctx context.Context, opts metav1.ListOptions) ([]T, *metav1.ListMeta, error)

// listAll lists every page of a list, opts.Limit objects at a time
// (0 = DefaultPageSize), following the continue tokens to the end within
// the resource version of the first page, as the API server's pagination
// promises. Its answer is the whole list, or an error:
//
//   - a page that fails fails the list; a continue token that expired (410
//     Gone) restarts it from the first page, at most maxListAttempts times
//     in all; pages of different attempts are never merged;
//   - a later page of another resource version than the first, a first page
//     with a continue token but no resource version, a repeated continue
//     token, remainingItemCount > 0 without a continue token, or more than
//     maxPages pages: *IncompleteListError.
//
// All its pages count together against the client's MaxResponseBytes
// (withListBudget). The answer's ListMeta has the first page's resource
// version, no continue token and no remainingItemCount.
func listAll[T any](ctx context.Context, resource string, opts metav1.ListOptions, page pageFunc[T]) ([]T, metav1.ListMeta, error) {
	if opts.Limit <= 0 {
		opts.Limit = DefaultPageSize
	}
	opts.Continue = ""
	for attempt := 1; ; attempt++ {
		items, meta, err := listOnce(withListBudget(ctx), resource, opts, page)
		if err == nil || !apierrors.IsResourceExpired(err) || !isContinuation(err) {
			return items, meta, err
		}
		if attempt == maxListAttempts {
			return nil, metav1.ListMeta{}, &IncompleteListError{Resource: resource,
				Reason: "its continue token expired (410 Gone) before the last page, " + strconv.Itoa(attempt) + " times in a row", Err: err}
		}
		klog.FromContext(ctx).V(4).Info("The continue token of a list expired: listing again from the first page",
			"resource", resource, "attempt", attempt, "err", err)
	}
}

// listWithin is listAll within timeout (a *ResponseTooSlowError past it).
func listWithin[T any](ctx context.Context, timeout time.Duration, resource string, opts metav1.ListOptions, page pageFunc[T]) ([]T, metav1.ListMeta, error) {
	var items []T
	var meta metav1.ListMeta
	err := withDeadline(ctx, timeout, func(ctx context.Context) error {
		var err error
		items, meta, err = listAll(ctx, resource, opts, page)
		return err
	})
	return items, meta, err
}

// continuationError is the error of a page after the first.
type continuationError struct{ err error }

func (e *continuationError) Error() string { return e.err.Error() }
func (e *continuationError) Unwrap() error { return e.err }

func isContinuation(err error) bool {
	_, ok := err.(*continuationError)
	return ok
}

// listOnce lists every page once, from the first.
func listOnce[T any](ctx context.Context, resource string, opts metav1.ListOptions, page pageFunc[T]) ([]T, metav1.ListMeta, error) {
	incomplete := func(reason string) error { return &IncompleteListError{Resource: resource, Reason: reason} }
	var all []T
	var first metav1.ListMeta
	seen := map[string]bool{}
	for n := 1; ; n++ {
		items, meta, err := page(ctx, opts)
		if err != nil {
			if n > 1 {
				err = &continuationError{err: fmt.Errorf("page %d: %w", n, err)}
			}
			return nil, metav1.ListMeta{}, err
		}
		if n == 1 {
			first = metav1.ListMeta{ResourceVersion: meta.ResourceVersion}
			all = items
		} else {
			if meta.ResourceVersion != first.ResourceVersion {
				return nil, metav1.ListMeta{}, incomplete(fmt.Sprintf("page %d is of resourceVersion %q, the first of %q: pages of different versions are never merged",
					n, meta.ResourceVersion, first.ResourceVersion))
			}
			all = append(all, items...)
		}
		switch {
		case meta.Continue == "" && meta.RemainingItemCount != nil && *meta.RemainingItemCount > 0:
			return nil, metav1.ListMeta{}, incomplete(fmt.Sprintf("page %d says %d more items remain but gives no continue token to get them",
				n, *meta.RemainingItemCount))
		case meta.Continue == "":
			return all, first, nil
		case first.ResourceVersion == "":
			return nil, metav1.ListMeta{}, incomplete("the first page gives a continue token but no resourceVersion: its pages cannot be told to be of one version")
		case seen[meta.Continue]:
			return nil, metav1.ListMeta{}, incomplete(fmt.Sprintf("page %d repeats an earlier continue token", n))
		case n == maxPages:
			return nil, metav1.ListMeta{}, incomplete(fmt.Sprintf("still not complete after %d pages", maxPages))
		}
		seen[meta.Continue] = true
		// The continue token carries the version and the rest of the
		// query; the API server refuses a resourceVersion beside it.
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = meta.Continue, "", ""
	}
}
