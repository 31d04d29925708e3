package cgroupcpu

import (
	"path/filepath"
	"testing"

	"github.com/cpusched/cpusched/internal/faketree"
)

func TestV2Dir(t *testing.T) {
	v1Only := "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	tests := []struct {
		name   string
		files  map[string]string
		want   string // under the tree's root
		wantOK bool
	}{
		{
			name:  "cgroup v2",
			files: map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/ctr\n", "proc/self/mountinfo": v2Mountinfo},
			want:  "sys/fs/cgroup/kubepods/pod1/ctr", wantOK: true,
		},
		{
			name:  "both hierarchies, the process in v2's root",
			files: map[string]string{"proc/self/cgroup": "1:cpu:/box\n0::/\n", "proc/self/mountinfo": v1Mountinfo},
			want:  "sys/fs/cgroup/unified", wantOK: true,
		},
		{
			name:  "cgroup v1 alone",
			files: map[string]string{"proc/self/cgroup": "1:cpu:/box\n", "proc/self/mountinfo": v1Only},
		},
		{
			name:  "a cgroup outside the mounted part",
			files: map[string]string{"proc/self/cgroup": "0::/elsewhere\n", "proc/self/mountinfo": "25 30 0:23 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
		},
		{name: "no /proc", files: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := faketree.New(t, tt.files)
			dir, ok, err := V2Dir(root)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tt.wantOK {
				want = filepath.Join(root, tt.want)
			}
			if dir != want || ok != tt.wantOK {
				t.Errorf("got %q, %v; want %q, %v", dir, ok, want, tt.wantOK)
			}
		})
	}
}
