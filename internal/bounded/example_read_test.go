package bounded_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
)

func ExampleReadFile() {
	_, err := bounded.ReadFile(context.Background(), "/dev/zero", 1<<20, time.Second)
	fmt.Println(errors.Is(err, bounded.ErrTooLarge))
	// Output: true
}
