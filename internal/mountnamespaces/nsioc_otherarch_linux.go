//go:build linux && !(386 || amd64 || arm || arm64 || loong64 || riscv64 || s390x)

package mountnamespaces

// iocGeneric: this architecture encodes ioctl numbers otherwise; the
// kernel's list of namespaces is not used here (the walks find them).
const iocGeneric = false
