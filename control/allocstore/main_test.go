package allocstore

import (
	"testing"

	"github.com/edgelink/edgelink/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
