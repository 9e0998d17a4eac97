package dataplane

// The generated lb_bpfel.go and lb_bpfel.o are committed, so building
// needs no clang; regenerating needs clang and libbpf-dev
// (integration/install-deps.sh installs them).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type svc_key -type svc -type backend -type rev_key -type rev -type counter lb bpf/lb.c
