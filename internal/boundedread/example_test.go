package boundedread_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/volrecon/volrecon/internal/boundedread"
)

func ExampleReadFile() {
	_, err := boundedread.ReadFile(context.Background(), "/dev/zero", 1<<20, time.Second)
	fmt.Println(errors.Is(err, boundedread.ErrTooLarge))
	// Output: true
}
