package cpusched_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io"

	"github.com/cpusched/cpusched"
)

// Example runs a CPU-heavy checksum as a task that yields at the end of
// each slice, then a task in a low-priority group.
func Example() {
	s, err := cpusched.New(cpusched.WithWorkers(2))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	block := make([]byte, 64<<10)
	var sum uint32
	err = s.Run(context.Background(), func(t *cpusched.Task) error {
		for range 100 {
			sum = crc32.Update(sum, crc32.IEEETable, block)
			if err := t.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	})
	fmt.Println(err, sum)

	if err := s.SetGroupWeight("reports", 10); err != nil {
		panic(err)
	}
	h, err := s.Go(context.Background(), func(t *cpusched.Task) error { return nil },
		cpusched.WithGroup("reports"), cpusched.WithNice(10))
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(), s.Stats().Completed)
	// Output:
	// <nil> 3719546193
	// <nil> 2
}

// ExampleTask_Blocking gives the slot away while the task waits.
func ExampleTask_Blocking() {
	s, _ := cpusched.New(cpusched.WithWorkers(1))
	defer s.Close(context.Background())
	results := make(chan int, 1)
	results <- 42
	err := s.Run(context.Background(), func(t *cpusched.Task) error {
		var v int
		t.Blocking(func() { v = <-results }) // another task may run meanwhile
		fmt.Println("got", v)
		return nil
	})
	fmt.Println(err)
	// Output:
	// got 42
	// <nil>
}

// ExampleWithKind runs one function literal, so one kind unless named,
// for two kinds of work: a short lookup, and a hash that cannot yield (it
// stands for bcrypt). Named apart, the scheduler learns that the hashes run past their slices
// without a Checkpoint and places new ones as the long tasks they are,
// while the lookups of the same group keep the small-task lane.
func ExampleWithKind() {
	s, _ := cpusched.New(cpusched.WithWorkers(1))
	defer s.Close(context.Background())
	serve := func(password []byte) func(*cpusched.Task) error {
		return func(*cpusched.Task) error {
			if password == nil {
				return nil // a lookup
			}
			crc32.ChecksumIEEE(password) // a call with no Checkpoint inside
			return nil
		}
	}
	login, lookup := cpusched.WithKind("login"), cpusched.WithKind("lookup")
	fmt.Println(s.Run(context.Background(), serve([]byte("secret")), login))
	fmt.Println(s.Run(context.Background(), serve(nil), lookup))
	// Output:
	// <nil>
	// <nil>
}

// checkpointReader and checkpointWriter let code that cannot call
// Checkpoint itself (a codec, a compressor) yield at each Read or Write.
type checkpointReader struct {
	t *cpusched.Task
	r io.Reader
}

func (c checkpointReader) Read(p []byte) (int, error) {
	if err := c.t.Checkpoint(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type checkpointWriter struct {
	t *cpusched.Task
	w io.Writer
}

func (c checkpointWriter) Write(p []byte) (int, error) {
	if err := c.t.Checkpoint(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// ExampleTask_Checkpoint_stream encodes and decodes a PNG, which call no
// Checkpoint themselves, through a Writer and a Reader that do.
func ExampleTask_Checkpoint_stream() {
	s, err := cpusched.New(cpusched.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	img := image.NewGray(image.Rect(0, 0, 640, 480))
	var buf bytes.Buffer
	err = s.Run(context.Background(), func(t *cpusched.Task) error {
		if err := png.Encode(checkpointWriter{t, &buf}, img); err != nil {
			return err
		}
		decoded, _, err := image.Decode(checkpointReader{t, &buf})
		if err != nil {
			return err
		}
		fmt.Println(decoded.Bounds())
		return nil
	})
	fmt.Println(err)
	// Output:
	// (0,0)-(640,480)
	// <nil>
}
