"""A matplotlib figure written whole or not at all, shared by the plot scripts of reports/: a
temporary file next to the target, renamed over it; on failure one line on stderr, no file left."""
import os
import sys


def save_png(fig, path, dpi):
    """True when `path` holds the figure; False (one line on stderr, nothing left) when not."""
    tmp = f"{path}.tmp{os.getpid()}.png"
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
        return True
    except OSError as e:
        print(f"cannot write {path}: {e.strerror}", file=sys.stderr)
        return False
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
