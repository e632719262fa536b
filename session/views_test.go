package session_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// viewCells is a notebook's worth of NumPy and pandas code that relies on views sharing
// memory with what they were taken from ("subarrays are views"), as a tutorial has it.
var viewCells = []string{
	"import numpy as np, pandas as pd\nx = np.arange(10)\nx2 = np.arange(12).reshape(3, 4)",
	"x2_sub = x2[:2, :2]\nprint(x2_sub)",
	"x2_sub[0, 0] = 99\nprint(x2_sub)\nprint(x2)",
	"x2_sub_copy = x2[:2, :2].copy()\nx2_sub_copy[0, 0] = 42\nprint(x2)",
	"r = x[::-1]\nr[0] = -1\nprint(x, r.base is x)",
	"f = x2.ravel()\nf[1] = 7\nprint(x2, np.shares_memory(f, x2))",
	"t = x2.T\nt[0, 2] = 1000\nprint(x2, t.flags['F_CONTIGUOUS'])",
	"fancy = x[[1, 3]]\nfancy[0] = 555\nprint(x, np.shares_memory(fancy, x))",
	"row = x2[1]\nrow *= 2\nprint(x2)",
	"col = x2[:, 3]\ncol[:] = 0\nprint(x2, col.strides)",
	"grid = np.zeros((2, 3))\ngdf = pd.DataFrame(grid)\ngrid[0, 0] = 5\nprint(gdf)",
	"df = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0], 's': ['p', 'q', 'r']})\nvals = df['a'].values\nsb = df['b']",
	"vals[1] = 20\nprint(df)",
	"sb.iloc[2] = 60.0\nprint(df)",
	"df['s'].values[0] = 'P'\nprint(df)",
	"print(np.shares_memory(vals, df['a'].values), np.shares_memory(x2_sub, x2), np.shares_memory(t, x2), np.shares_memory(row, x2))",
	"x2_sub[1, 1] = -5\nprint(x2)\nprint(t)",
}

// The way the view finding was found: the same cells run straight in one session and, in
// another, with a stop before every cell: every output is the same.
func TestNumpyViewsSurviveAStopBeforeEveryCell(t *testing.T) {
	c := testenv.Client(t)
	straight := testenv.Start(t, c, session.Spec{})
	stopped := testenv.Start(t, c, session.Spec{})
	name := stopped.Name()
	for i, code := range viewCells {
		want := run(t, straight, code)
		require.Equal(t, "ok", string(want.Status), "cell %d: %s", i, want.Stderr)
		if i > 0 {
			stopped = stopStart(t, c, name)
		}
		got := run(t, stopped, code)
		assert.Equal(t, want.Stdout, got.Stdout, "cell %d after a stop:\n%s", i, code)
		assert.Equal(t, want.Stderr, got.Stderr, "cell %d after a stop", i)
		if got.Restored != nil {
			assert.Empty(t, got.Restored.Copies, "cell %d: nothing came back as a copy", i)
			assert.Empty(t, got.Restored.Failed, "cell %d", i)
		}
	}
	r := run(t, stopped, "x2_sub.base is x2.base, t.base is x2.base, vals.base is df._mgr.blocks[0].values or vals.base is df._mgr.blocks[1].values")
	require.NotNil(t, r.Result, r.Stderr)
	assert.Equal(t, "(True, True, True)", *r.Result)
}
