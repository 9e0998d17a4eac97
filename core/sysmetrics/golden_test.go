package sysmetrics

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden files")

// goldenCase is a fixture tree captured from (or written for) one kernel,
// and its ".next" overlay: the same files with counters advanced by known
// amounts, read 10 s later.
type goldenCase struct {
	fixture string
	utmp    []int16 // written as Root/var/run/utmp; nil for none
	// second is what the second collection must report exactly: rates
	// computed by hand from the overlay's increments over 10 s.
	second map[string]float64
	// absent series must not appear in the second collection (the kernel
	// has no such field).
	absent []string
}

var goldenCases = []goldenCase{
	{
		fixture: "debian12-kernel-6.18.44-fc-v669",
		// The capture host has no utmp: two logins and a getty.
		utmp: []int16{utBootTime, utRunLvl, utUserProcess, utLoginProcess, utUserProcess},
		second: map[string]float64{
			// cpu0: +60 user +20 system +100 idle +20 iowait = 200 ticks.
			`node_cpu_usage_ratio{cpu="0",mode="user"}`:                                   0.3,
			`node_cpu_usage_ratio{cpu="0",mode="system"}`:                                 0.1,
			`node_cpu_usage_ratio{cpu="0",mode="idle"}`:                                   0.5,
			`node_cpu_usage_ratio{cpu="0",mode="iowait"}`:                                 0.1,
			`node_cpu_usage_ratio{cpu="0",mode="steal"}`:                                  0,
			`node_cpu_usage_ratio{cpu="1",mode="user"}`:                                   0.5,
			`node_cpu_usage_ratio{cpu="1",mode="idle"}`:                                   0.5,
			`node_cpu_average_usage_ratio{mode="user"}`:                                   0.4,
			`node_cpu_average_usage_ratio{mode="system"}`:                                 0.05,
			`node_cpu_average_usage_ratio{mode="idle"}`:                                   0.5,
			`node_cpu_average_usage_ratio{mode="iowait"}`:                                 0.05,
			`node_cpu_average_usage_ratio{mode="guest"}`:                                  0,
			`node_cpus_online`:                                                            2,
			`node_context_switches_per_second`:                                            5000,
			`node_intr_per_second`:                                                        1234.5,
			`node_forks_per_second`:                                                       10,
			`node_softirqs_per_second`:                                                    200,
			`node_procs_running`:                                                          3,
			`node_boot_time_seconds`:                                                      1795255867,
			`node_load1`:                                                                  1.5,
			`node_load_tasks_runnable`:                                                    3,
			`node_load_tasks`:                                                             130,
			`node_uptime_seconds`:                                                         2250.18,
			`node_vmstat_pgpgin_bytes_per_second`:                                         40960,
			`node_vmstat_pgpgout_bytes_per_second`:                                        102400,
			`node_vmstat_pgfault_per_second`:                                              100,
			`node_vmstat_pgmajfault_per_second`:                                           0.5,
			`node_vmstat_oom_kill_per_second`:                                             0.1,
			`node_vmstat_pswpin_bytes_per_second`:                                         0,
			`node_memory_MemTotal_bytes`:                                                  24684084 * 1024,
			`node_memory_Active_anon_bytes`:                                               2108 * 1024,
			`node_memory_HugePages_Total`:                                                 0,
			`node_memory_Hugepagesize_bytes`:                                              2048 * 1024,
			`node_memory_numa_MemTotal_bytes{numa_node="0"}`:                              7825612 * 1024,
			`node_memory_numa_HugePages_Free{numa_node="0"}`:                              0,
			`node_buddyinfo_blocks{numa_node="0",order="10",zone="DMA32"}`:                752,
			`node_disk_reads_completed_per_second{device="vda",type="disk"}`:              10,
			`node_disk_read_bytes_per_second{device="vda",type="disk"}`:                   102400,
			`node_disk_read_time_seconds_per_second{device="vda",type="disk"}`:            0.05,
			`node_disk_writes_completed_per_second{device="vda",type="disk"}`:             30,
			`node_disk_written_bytes_per_second{device="vda",type="disk"}`:                409600,
			`node_disk_write_time_seconds_per_second{device="vda",type="disk"}`:           0.15,
			`node_disk_io_now{device="vda",type="disk"}`:                                  3,
			`node_disk_io_time_seconds_per_second{device="vda",type="disk"}`:              0.1,
			`node_disk_io_time_weighted_seconds_per_second{device="vda",type="disk"}`:     0.2,
			`node_disk_discards_completed_per_second{device="vda",type="disk"}`:           1,
			`node_disk_discarded_bytes_per_second{device="vda",type="disk"}`:              4096,
			`node_disk_discard_time_seconds_per_second{device="vda",type="disk"}`:         0.003,
			`node_disk_flush_requests_per_second{device="vda",type="disk"}`:               2,
			`node_disk_flush_request_time_seconds_per_second{device="vda",type="disk"}`:   0.004,
			`node_network_receive_bytes_per_second{device="eth0"}`:                        1000,
			`node_network_receive_packets_per_second{device="eth0"}`:                      10,
			`node_network_transmit_bytes_per_second{device="eth0"}`:                       500,
			`node_network_transmit_packets_per_second{device="eth0"}`:                     5,
			`node_network_receive_bytes_per_second{device="lo"}`:                          0,
			`node_netstat_Tcp_ActiveOpens_per_second`:                                     2,
			`node_netstat_Tcp_PassiveOpens_per_second`:                                    1,
			`node_netstat_Tcp_InSegs_per_second`:                                          100,
			`node_netstat_Tcp_OutSegs_per_second`:                                         90,
			`node_netstat_Tcp_RetransSegs_per_second`:                                     0.3,
			`node_netstat_Tcp_CurrEstab`:                                                  5,
			`node_netstat_Udp_InDatagrams_per_second`:                                     10,
			`node_netstat_Ip_InReceives_per_second`:                                       110,
			`node_netstat_Ip_OutRequests_per_second`:                                      100,
			`node_netstat_TcpExt_ListenDrops_per_second`:                                  0.7,
			`node_netstat_TcpExt_ListenOverflows_per_second`:                              0.7,
			`node_netstat_TcpExt_TCPTimeouts_per_second`:                                  0.4,
			`node_filesystem_size_bytes{device="/dev/vda",fstype="ext4",mountpoint="/"}`:  1000000 * 4096,
			`node_filesystem_avail_bytes{device="/dev/vda",fstype="ext4",mountpoint="/"}`: 350000 * 4096,
			`node_filesystem_readonly{device="/dev/vda",fstype="ext4",mountpoint="/"}`:    0,
			// cat (R), kthreadd, "x) (y", sleep (S), a kworker (I), a
			// stopped sleep (T) and a zombie (Z).
			`node_processes_state{state="R"}`: 1,
			`node_processes_state{state="S"}`: 3,
			`node_processes_state{state="I"}`: 1,
			`node_processes_state{state="T"}`: 1,
			`node_processes_state{state="Z"}`: 1,
			`node_processes_state{state="D"}`: 0,
			`node_processes`:                  7,
			`node_processes_threads`:          7,
			`node_users_logged_in`:            2,
		},
		absent: []string{
			// pseudo filesystems and the /dev/shm tmpfs are filtered out
			`node_filesystem_size_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/dev/shm"}`,
			// unused loop devices are skipped
			`node_disk_io_now{device="loop0",type="disk"}`,
		},
	},
	{
		fixture: "kernel-2.6.32",
		utmp:    []int16{utBootTime, utRunLvl, utLoginProcess, utUserProcess, utUserProcess, utUserProcess, utDeadProcess},
		second: map[string]float64{
			// cpu lines have 9 columns (no guest_nice before 2.6.33).
			`node_cpu_usage_ratio{cpu="0",mode="user"}`:                    0.5,
			`node_cpu_usage_ratio{cpu="0",mode="system"}`:                  0.1,
			`node_cpu_usage_ratio{cpu="0",mode="idle"}`:                    0.4,
			`node_cpu_usage_ratio{cpu="1",mode="user"}`:                    0.2,
			`node_cpu_usage_ratio{cpu="1",mode="system"}`:                  0.2,
			`node_cpu_usage_ratio{cpu="1",mode="idle"}`:                    0.6,
			`node_cpu_usage_ratio{cpu="2",mode="idle"}`:                    1,
			`node_cpu_usage_ratio{cpu="3",mode="user"}`:                    0.1,
			`node_cpu_usage_ratio{cpu="3",mode="idle"}`:                    0.8,
			`node_cpu_usage_ratio{cpu="3",mode="iowait"}`:                  0.1,
			`node_cpu_usage_ratio{cpu="3",mode="guest"}`:                   0,
			`node_cpu_average_usage_ratio{mode="user"}`:                    0.2,
			`node_cpu_average_usage_ratio{mode="system"}`:                  0.075,
			`node_cpu_average_usage_ratio{mode="idle"}`:                    0.7,
			`node_cpu_average_usage_ratio{mode="iowait"}`:                  0.025,
			`node_cpus_online`:                                             4,
			`node_context_switches_per_second`:                             8000,
			`node_intr_per_second`:                                         2500,
			`node_forks_per_second`:                                        3,
			`node_softirqs_per_second`:                                     500,
			`node_procs_blocked`:                                           1,
			`node_load5`:                                                   0.07,
			`node_vmstat_pgpgin_bytes_per_second`:                          32768,
			`node_vmstat_pgpgout_bytes_per_second`:                         3686400,
			`node_vmstat_pswpout_bytes_per_second`:                         4096,
			`node_vmstat_pgfault_per_second`:                               5000,
			`node_vmstat_pgmajfault_per_second`:                            0.3,
			`node_memory_AnonHugePages_bytes`:                              1146880 * 1024,
			`node_memory_HardwareCorrupted_bytes`:                          0,
			`node_memory_numa_MemTotal_bytes{numa_node="1"}`:               7942264 * 1024,
			`node_memory_numa_HugePages_Total{numa_node="1"}`:              0,
			`node_buddyinfo_blocks{numa_node="1",order="0",zone="Normal"}`: 1913,
			// 14-field diskstats: no discard or flush columns.
			`node_disk_reads_completed_per_second{device="sda",type="disk"}`:           4,
			`node_disk_read_bytes_per_second{device="sda",type="disk"}`:                32768,
			`node_disk_read_time_seconds_per_second{device="sda",type="disk"}`:         0.02,
			`node_disk_writes_completed_per_second{device="sda",type="disk"}`:          90,
			`node_disk_written_bytes_per_second{device="sda",type="disk"}`:             3686400,
			`node_disk_write_time_seconds_per_second{device="sda",type="disk"}`:        0.3,
			`node_disk_io_time_seconds_per_second{device="sda",type="disk"}`:           0.25,
			`node_disk_io_time_weighted_seconds_per_second{device="sda",type="disk"}`:  0.32,
			`node_disk_io_now{device="sda",type="disk"}`:                               1,
			`node_disk_reads_completed_per_second{device="sda2",type="part"}`:          4,
			`node_disk_reads_completed_per_second{device="sda1",type="part"}`:          0,
			`node_disk_io_time_weighted_seconds_per_second{device="dm-0",type="disk"}`: 0.15, // wrapped past 2^32 ms
			`node_disk_written_bytes_per_second{device="dm-0",type="disk"}`:            3686400,
			// old "%6s:%8lu" format: no space after the colon.
			`node_network_receive_bytes_per_second{device="eth0"}`:    250000,
			`node_network_receive_packets_per_second{device="eth0"}`:  200,
			`node_network_receive_drop_per_second{device="eth0"}`:     0.1,
			`node_network_transmit_bytes_per_second{device="eth0"}`:   120000,
			`node_network_transmit_packets_per_second{device="eth0"}`: 150,
			`node_network_receive_bytes_per_second{device="lo"}`:      100,
			`node_netstat_Tcp_ActiveOpens_per_second`:                 5,
			`node_netstat_Tcp_PassiveOpens_per_second`:                2,
			`node_netstat_Tcp_EstabResets_per_second`:                 0.1,
			`node_netstat_Tcp_CurrEstab`:                              16,
			`node_netstat_Tcp_RetransSegs_per_second`:                 0.7,
			`node_netstat_Tcp_OutRsts_per_second`:                     0.2,
			`node_netstat_Udp_InDatagrams_per_second`:                 30,
			`node_netstat_Udp_NoPorts_per_second`:                     1,
			`node_netstat_Ip_InReceives_per_second`:                   250,
			`node_netstat_Ip_OutRequests_per_second`:                  180,
			`node_netstat_TcpExt_ListenOverflows_per_second`:          0.3,
			`node_netstat_TcpExt_TCPTimeouts_per_second`:              0.9,
			// rootfs and the real root are both "/": the later one wins.
			`node_filesystem_size_bytes{device="/dev/mapper/vg_db01-lv_root",fstype="ext4",mountpoint="/"}`:             1000000 * 4096,
			`node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/boot"}`:                           5000000 * 4096,
			`node_filesystem_files_free{device="/dev/mapper/vg_db01-lv_data",fstype="xfs",mountpoint="/srv/data disk"}`: 60000 * 14,
			`node_filesystem_readonly{device="nas01:/export/backup",fstype="nfs",mountpoint="/mnt/backup"}`:             1,
			`node_processes_state{state="R"}`: 1,
			`node_processes_state{state="S"}`: 3,
			`node_processes_state{state="D"}`: 1,
			`node_processes_state{state="Z"}`: 1,
			`node_processes_state{state="T"}`: 1,
			`node_processes_state{state="I"}`: 0,
			`node_processes`:                  7,
			`node_processes_threads`:          1 + 1 + 1 + 28 + 61 + 1 + 1,
			`node_users_logged_in`:            3,
		},
		absent: []string{
			`node_cpu_usage_ratio{cpu="0",mode="guest_nice"}`,
			`node_memory_MemAvailable_bytes`,
			`node_vmstat_oom_kill_per_second`,
			`node_netstat_Tcp_InCsumErrors_per_second`,
			`node_netstat_TcpExt_TCPSynRetrans_per_second`,
			`node_disk_discards_completed_per_second{device="sda",type="disk"}`,
			`node_disk_flush_requests_per_second{device="sda",type="disk"}`,
			`node_disk_io_now{device="ram0",type="disk"}`,
			`node_filesystem_size_bytes{device="rootfs",fstype="rootfs",mountpoint="/"}`,
			`node_memory_numa_hugepages{numa_node="0",size="2097152"}`,
		},
	},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.fixture, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, filepath.Join("testdata", tc.fixture), root)
			if tc.utmp != nil {
				writeFiles(t, root, map[string]string{"var/run/utmp": string(utmpBytes(tc.utmp...))})
			}
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			c := testCollector(root, &now)

			first := collect(t, c)
			for _, s := range first {
				if strings.HasSuffix(s.Name, "_per_second") || strings.HasSuffix(s.Name, "_ratio") {
					t.Errorf("first collection has a rate: %s", key(s))
				}
			}
			checkGolden(t, tc.fixture+".1.txt", render(first))

			copyTree(t, filepath.Join("testdata", tc.fixture+".next"), root)
			now = now.Add(10 * time.Second)
			second := collect(t, c)
			checkGolden(t, tc.fixture+".2.txt", render(second))

			got := byKey(t, second)
			for k, want := range tc.second {
				v, ok := got[k]
				switch {
				case !ok:
					t.Errorf("missing %s", k)
				case v != want:
					t.Errorf("%s = %v, want %v", k, v, want)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("unexpected %s", k)
				}
			}
			for k, v := range got {
				if v < 0 {
					t.Errorf("negative %s = %v", k, v)
				}
				if strings.HasSuffix(k, "_ratio") && v > 1 {
					t.Errorf("ratio above 1: %s = %v", k, v)
				}
			}
		})
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := writeFile(path, []byte(got)); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		wantSet := make(map[string]bool, len(wl))
		for _, l := range wl {
			wantSet[l] = true
		}
		gotSet := make(map[string]bool, len(gl))
		for _, l := range gl {
			gotSet[l] = true
			if !wantSet[l] {
				t.Errorf("%s: unexpected line %q", name, l)
			}
		}
		for _, l := range wl {
			if !gotSet[l] {
				t.Errorf("%s: missing line %q", name, l)
			}
		}
	}
}
