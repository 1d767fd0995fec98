//go:build linux && (386 || amd64 || arm || arm64 || loong64 || riscv64 || s390x)

package mountnamespaces

// iocGeneric: the architecture encodes ioctl numbers as asm-generic does
// (direction in the top two bits), which kernelList assumes.
const iocGeneric = true
