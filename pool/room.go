package pool

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// sandboxBytes is what one live desktop is budgeted in memory when the
// pool sizes its cap from the machine: measured at about 40 MiB (Xvfb,
// openbox, guestd and a terminal, PSS), with headroom for heavier apps.
const sandboxBytes = 64 << 20

// maxRoom bounds the memory-derived cap.
const maxRoom = 1024

// machineRoom is how many desktops fit in three quarters of the memory
// available now (0 when it cannot be read). A burst of resets on a small
// warm pool queues for boots within this cap instead of failing
// pool_exhausted while the machine still has room.
func machineRoom() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return int(min(kb*1024*3/4/sandboxBytes, maxRoom))
	}
	return 0
}
