package mountnamespaces

import "testing"

// WithoutKernelList makes List find the namespaces by walking only, as on
// a kernel before 6.12, until the end of the test.
func WithoutKernelList(t testing.TB) {
	kernelListing = false
	t.Cleanup(func() { kernelListing = true })
}

// AfterListing runs f after each listing of List (1, 2, …), until the end
// of the test.
func AfterListing(t testing.TB, f func(listing int)) {
	afterListing = f
	t.Cleanup(func() { afterListing = nil })
}
