package childproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a child: "sleep" blocks for a
// minute, "result" prints chatter and a JSON result, "fail" fails, and
// "parent" starts a "sleep" child with DieWithParent, prints its pid and
// blocks.
const helperEnv = "CHILDPROC_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "sleep":
		time.Sleep(time.Minute)
	case "result":
		fmt.Println("starting")
		fmt.Println(`{"n":7}`)
	case "fail":
		fmt.Fprintln(os.Stderr, "bad cell")
		os.Exit(2)
	case "parent":
		cmd := helper(context.Background(), "sleep")
		DieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func helper(ctx context.Context, mode string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

func TestDecodeLast(t *testing.T) {
	tests := []struct {
		out     string
		want    int
		wantErr string // "" for none
	}{
		{"noise\n{\"n\":7}\n\n", 7, ""},
		{`{"n":3}`, 3, ""},
		{"", 0, "the child printed no result"},
		{"\n \n", 0, "the child printed no result"},
		{"{\"n\":7}\nnot json\n", 0, `the child's result "not json"`},
	}
	for _, tt := range tests {
		var v struct{ N int }
		err := DecodeLast([]byte(tt.out), &v)
		switch {
		case tt.wantErr == "" && (err != nil || v.N != tt.want):
			t.Errorf("DecodeLast(%q): got %d, %v, want %d", tt.out, v.N, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("DecodeLast(%q): got error %v, want one containing %q", tt.out, err, tt.wantErr)
		}
	}
}

func TestReadLine(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("{\"n\":1}\n{\"n\":2}"))
	for _, want := range []int{1, 2} {
		var v struct{ N int }
		if err := ReadLine(r, &v); err != nil || v.N != want {
			t.Errorf("ReadLine: got %d, %v, want %d", v.N, err, want)
		}
	}
	var v struct{ N int }
	if err := ReadLine(r, &v); err != io.EOF {
		t.Errorf("ReadLine at the end: got %v, want io.EOF", err)
	}
}

func TestOutput(t *testing.T) {
	ctx := context.Background()
	var v struct{ N int }
	if err := Output(ctx, helper(ctx, "result"), &v); err != nil || v.N != 7 {
		t.Errorf("Output(result): got %d, %v, want 7", v.N, err)
	}
	if err := Output(ctx, helper(ctx, "fail"), &v); err == nil || !strings.Contains(err.Error(), "bad cell") {
		t.Errorf("Output(fail): got %v, want an error with the child's stderr", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := Output(cancelled, helper(cancelled, "sleep"), &v); err != context.Canceled {
		t.Errorf("Output with a cancelled context: got %v, want context.Canceled", err)
	}
}

func TestSelf(t *testing.T) {
	command, err := Self("lab-child", "switch")
	if err != nil {
		t.Fatal(err)
	}
	cmd := command(context.Background(), "-procs", "2")
	exe, _ := os.Executable()
	if got, want := strings.Join(cmd.Args[1:], " "), "lab-child switch -procs 2"; cmd.Path != exe || got != want {
		t.Errorf("Self: got %s %s, want %s %s", cmd.Path, got, exe, want)
	}
	checkDiesWithParent(t, cmd)
}
