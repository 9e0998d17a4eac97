// Package sysmetrics is the agent's system metrics collector: it reads
// /proc and /sys (under Options.Root) and returns node_exporter-like
// samples in base units (bytes, seconds, ratios 0..1).
//
// # Reading
//
// Every file is read once per collection into a reused buffer with
// openat/read/getdents system calls, and parsed by hand: no regular
// expressions, no fmt, no per-line allocation. Label sets and metric names
// are built when a series is first seen and reused afterwards, so a
// steady-state Collect into a reused slice allocates nothing (except for
// the goroutine that statfs'es a network filesystem under a timeout).
//
// Values are located by name wherever the kernel names them: meminfo and
// vmstat keys, the header line of each /proc/net/snmp and /proc/net/netstat
// section, the two header lines of /proc/net/dev, the "cpu"/"ctxt"/...
// keys of /proc/stat. Files without names (the columns of a cpu line,
// diskstats, loadavg, /proc/PID/stat) are read by their documented column
// positions, accepting the variants of older kernels: cpu lines of 4 to 10
// columns and diskstats lines of 14, 18 or 20 fields.
//
// A missing file is skipped silently: not every kernel has every file. A
// file that cannot be read, or a malformed line (reported as a
// *ParseError naming the file and the line; only the first bad line of a
// file per collection, with a count of the others), does not stop the rest
// of the collection; Collect returns the errors.Join of them all.
//
// # Rates
//
// Counters are turned into per-second rates over the time between two
// collections (Options.Now), so the first Collect returns gauges only, and
// a series seen for the first time gets its first rate one collection
// later. A counter that went backwards was reset (a re-created network
// interface, a replaced disk, a restarted kernel counter): its rate is
// skipped for that collection, never reported negative. Two kinds of
// counters wrap at 2^32 instead, and then the rate is computed across the
// wrap:
//
//   - the millisecond times of /proc/diskstats, which the kernel prints as
//     unsigned int on every version (io_time wraps after 49.7 busy days);
//   - /proc/net/dev counters on 32-bit kernels (and some old drivers). A
//     decrease counts as a wrap only if the counter has always fit in 32
//     bits, no counter of the interface ever exceeded 2^32, and it fell by
//     more than 2^31; otherwise the interface is taken as reset. Once any
//     counter of a device is seen above 2^32 its counters are known to be
//     64-bit.
//
// A device or CPU any of whose 64-bit counters went backwards skips all its
// rates once, since its readings no longer belong together. The exception
// is a CPU's idle and iowait ticks, which proc(5) documents may decrease:
// a decrease there counts as no progress.
//
// # Choices
//
// Block devices: whole disks and partitions are both reported, told apart
// by the label type="disk" or type="part" (whether
// /sys/class/block/NAME/partition exists). RAM disks (ram*) are skipped,
// and so are loop devices that never did any I/O: hosts with snaps have
// dozens of them.
//
// Filesystems: by default the mount table is read and each mount point
// statfs'ed at Root+mount point. The table is /proc/self/mounts (else
// /proc/mounts); under another Root it is Root/proc/1/mounts first, since
// there "self" would be the agent's container and init's is the host's. Dropped are
// pseudo filesystems (proc, sysfs, cgroup, cgroup2, devpts, devtmpfs,
// debugfs, tracefs, securityfs, bpf, mqueue, hugetlbfs, autofs, ramfs,
// rootfs, squashfs, nsfs, ...), overlay (container layers; the backing
// filesystem is reported where it is mounted), mount points under /dev,
// /proc and /sys, and systemd credential and container runtime mounts
// (/run/credentials/*, /var/lib/docker/*, /var/lib/containers/storage/*).
// tmpfs is kept (/run, /tmp): it is backed by memory and swap, and a full
// /run or /tmp breaks a host. When a mount point is mounted over, only the
// last (visible) mount is reported. statfs on network and FUSE filesystems
// runs with a 2 s timeout; a hung mount is skipped until its statfs
// returns. Mount points that cannot be entered (EACCES, ENOENT) are
// skipped silently.
//
// Processes are counted from /proc/PID/stat (state is the field after the
// last ')', since the command name may contain one). node_exporter leaves
// this collector off by default because it is the one whose cost grows
// with the machine's load; here it costs three system calls per process.
//
// Logged-in users are the USER_PROCESS records of Root/var/run/utmp (or
// Root/run/utmp) in glibc's 384-byte x86_64 layout, which is what who(1)
// counts. Systems without utmp report nothing.
//
// # Metrics
//
// Kind: gauge is an instantaneous value; rate is a per-second rate of a
// kernel counter (name ends in _per_second); ratio is a share of time in
// 0..1. Labels are listed in the order they appear (sorted by name).
//
// Every rate's counter is also emitted as it was read, under
// node_exporter's name and type: NAME_per_second has NAME_total (in the
// same base unit: node_network_receive_bytes_total,
// node_disk_io_time_seconds_total, node_context_switches_total, ...), from
// the first collection on, and each CPU's times are
// node_cpu_seconds_total{cpu, mode} (ticks / USER_HZ). Dashboards written
// for node_exporter (rate(node_cpu_seconds_total{mode="idle"}[5m]), ...)
// then work unchanged; the gauges, memory, filesystem and load names above
// are node_exporter's already.
//
//	Name                                              Kind   Unit     Labels                  Source
//	node_cpu_usage_ratio                              ratio  1        cpu, mode               /proc/stat cpuN
//	node_cpu_average_usage_ratio                      ratio  1        mode                    /proc/stat cpu (all CPUs)
//	node_cpus_online                                  gauge  CPUs                             /proc/stat
//	node_context_switches_per_second                  rate   1/s                              /proc/stat ctxt
//	node_intr_per_second                              rate   1/s                              /proc/stat intr (total)
//	node_softirqs_per_second                          rate   1/s                              /proc/stat softirq (total)
//	node_forks_per_second                             rate   1/s                              /proc/stat processes
//	node_procs_running                                gauge  tasks                            /proc/stat
//	node_procs_blocked                                gauge  tasks                            /proc/stat
//	node_boot_time_seconds                            gauge  s (Unix)                         /proc/stat btime
//	node_load1, node_load5, node_load15               gauge  tasks                            /proc/loadavg
//	node_load_tasks_runnable                          gauge  tasks                            /proc/loadavg
//	node_load_tasks                                   gauge  tasks                            /proc/loadavg (all threads)
//	node_uptime_seconds                               gauge  s                                /proc/uptime
//	node_time_seconds                                 gauge  s (Unix)                         the collection's time (Options.Now)
//	node_memory_<Field>_bytes                         gauge  bytes                            /proc/meminfo, kB fields
//	node_memory_<Field>                               gauge  pages                            /proc/meminfo, unitless fields (HugePages_*)
//	node_memory_numa_<Field>_bytes                    gauge  bytes    numa_node               /sys/devices/system/node/nodeN/meminfo
//	node_memory_numa_<Field>                          gauge  pages    numa_node               same, unitless fields
//	node_memory_numa_hugepages                        gauge  pages    numa_node, size         nodeN/hugepages/hugepages-*/nr_hugepages
//	node_memory_numa_hugepages_free                   gauge  pages    numa_node, size         .../free_hugepages
//	node_memory_numa_hugepages_surplus                gauge  pages    numa_node, size         .../surplus_hugepages
//	node_vmstat_pgpgin_bytes_per_second               rate   bytes/s                          /proc/vmstat pgpgin (KiB)
//	node_vmstat_pgpgout_bytes_per_second              rate   bytes/s                          /proc/vmstat pgpgout (KiB)
//	node_vmstat_pswpin_bytes_per_second               rate   bytes/s                          /proc/vmstat pswpin (pages)
//	node_vmstat_pswpout_bytes_per_second              rate   bytes/s                          /proc/vmstat pswpout (pages)
//	node_vmstat_pgfault_per_second                    rate   1/s                              /proc/vmstat pgfault
//	node_vmstat_pgmajfault_per_second                 rate   1/s                              /proc/vmstat pgmajfault
//	node_vmstat_oom_kill_per_second                   rate   1/s                              /proc/vmstat oom_kill (4.13+)
//	node_buddyinfo_blocks                             gauge  blocks   numa_node, order, zone  /proc/buddyinfo
//	node_disk_reads_completed_per_second              rate   1/s      device, type            /proc/diskstats
//	node_disk_reads_merged_per_second                 rate   1/s      device, type            /proc/diskstats
//	node_disk_read_bytes_per_second                   rate   bytes/s  device, type            /proc/diskstats (sectors x 512)
//	node_disk_read_time_seconds_per_second            rate   s/s      device, type            /proc/diskstats (ms)
//	node_disk_writes_completed_per_second             rate   1/s      device, type            /proc/diskstats
//	node_disk_writes_merged_per_second                rate   1/s      device, type            /proc/diskstats
//	node_disk_written_bytes_per_second                rate   bytes/s  device, type            /proc/diskstats (sectors x 512)
//	node_disk_write_time_seconds_per_second           rate   s/s      device, type            /proc/diskstats (ms)
//	node_disk_io_now                                  gauge  requests device, type            /proc/diskstats (in flight)
//	node_disk_io_time_seconds_per_second              rate   s/s      device, type            /proc/diskstats (busy share)
//	node_disk_io_time_weighted_seconds_per_second     rate   s/s      device, type            /proc/diskstats (mean queue)
//	node_disk_discards_completed_per_second           rate   1/s      device, type            /proc/diskstats (4.18+)
//	node_disk_discards_merged_per_second              rate   1/s      device, type            /proc/diskstats (4.18+)
//	node_disk_discarded_bytes_per_second              rate   bytes/s  device, type            /proc/diskstats (4.18+)
//	node_disk_discard_time_seconds_per_second         rate   s/s      device, type            /proc/diskstats (4.18+)
//	node_disk_flush_requests_per_second               rate   1/s      device, type            /proc/diskstats (5.5+)
//	node_disk_flush_request_time_seconds_per_second   rate   s/s      device, type            /proc/diskstats (5.5+)
//	node_filesystem_size_bytes                        gauge  bytes    device, fstype, mountpoint  statfs
//	node_filesystem_free_bytes                        gauge  bytes    device, fstype, mountpoint  statfs
//	node_filesystem_avail_bytes                       gauge  bytes    device, fstype, mountpoint  statfs (free to non-root)
//	node_filesystem_files                             gauge  inodes   device, fstype, mountpoint  statfs
//	node_filesystem_files_free                        gauge  inodes   device, fstype, mountpoint  statfs
//	node_filesystem_readonly                          gauge  0/1      device, fstype, mountpoint  mount options
//	node_network_receive_<field>_per_second           rate   1/s      device                  /proc/net/dev Receive section
//	node_network_transmit_<field>_per_second          rate   1/s      device                  /proc/net/dev Transmit section
//	node_netstat_Tcp_<Field>_per_second               rate   1/s                              /proc/net/snmp Tcp
//	node_netstat_Tcp_CurrEstab                        gauge  conns                            /proc/net/snmp Tcp
//	node_netstat_Udp_<Field>_per_second               rate   1/s                              /proc/net/snmp Udp
//	node_netstat_Ip_<Field>_per_second                rate   1/s                              /proc/net/snmp Ip
//	node_netstat_TcpExt_<Field>_per_second            rate   1/s                              /proc/net/netstat TcpExt
//	node_processes_state                              gauge  procs    state                   /proc/PID/stat
//	node_processes                                    gauge  procs                            /proc/PID
//	node_processes_threads                            gauge  threads                          /proc/PID/stat num_threads
//	node_users_logged_in                              gauge  users                            utmp USER_PROCESS records
//
// mode is one of user, nice, system, idle, iowait, irq, softirq, steal,
// guest, guest_nice (those the kernel prints). The shares are of the CPU
// ticks elapsed between two collections, so they need no USER_HZ; user,
// nice, system, idle, iowait, irq, softirq and steal add up to 1, while
// guest and guest_nice are the parts of user and nice spent running guests.
//
// /proc/net/dev <field> is each name of the header: bytes, packets, errs,
// drop, fifo, frame, compressed, multicast (receive); bytes, packets, errs,
// drop, fifo, colls, carrier, compressed (transmit). bytes are bytes/s.
//
// The netstat fields are: Tcp ActiveOpens, PassiveOpens, AttemptFails,
// EstabResets, InSegs, OutSegs, RetransSegs, InErrs, OutRsts,
// InCsumErrors; Udp InDatagrams, NoPorts, InErrors, OutDatagrams,
// RcvbufErrors, SndbufErrors, InCsumErrors; Ip InReceives, InDelivers,
// OutRequests, ForwDatagrams, InDiscards, OutDiscards; TcpExt
// ListenOverflows, ListenDrops, TCPTimeouts, TCPSynRetrans, SyncookiesSent,
// SyncookiesRecv, SyncookiesFailed, TCPAbortOnTimeout. Fields a kernel does
// not have are not reported.
//
// Meminfo fields are kept generically: every "Key: value [kB]" line
// becomes a metric, "Active(anon)" becoming Active_anon. HugePages_Total,
// _Free, _Rsvd and _Surp count pages of Hugepagesize bytes and are
// reported as page counts, as node_exporter does.
//
// node_processes_state is always reported for R, S, D, Z, T and I (I,
// idle kernel threads, exists since 4.14) and for other states (t, X, W,
// P, K) when present. size of the hugepage metrics is in bytes.
package sysmetrics
