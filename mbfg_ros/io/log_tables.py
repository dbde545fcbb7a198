"""Logs written by a DAQ, a PLC or a lab script, read as named numeric columns.

Three formats, chosen by the file's suffix:

- CSV (``.csv``, ``.txt``, ``.tsv``, ``.dat``): a header row of column names, then one row per
  sample; the delimiter is sniffed (``,``, ``;``, tab, ``|`` or spaces) unless given; lines
  starting with ``#`` and blank lines are skipped; empty cells and ``nan`` are NaN;
- MATLAB ``.mat`` (v4 to v7, with scipy.io.loadmat): each numeric vector variable is a column
  named after it, a field of a struct ``s.field``, and column j of an (N, k) matrix
  ``name[j]`` (0-based); a v7.3 file (HDF5) is refused with what to do about it;
- NumPy ``.npz``: the arrays, named as in a .mat file.

Only the columns asked for are converted (:meth:`LogTable.column`), so a wide log with text
columns reads fine as long as the mapped columns are numbers; a cell that is not a number is
one error naming the file, the column, the row and the line.
"""
from __future__ import annotations

import csv
import difflib
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbfg_ros.errors import MbfgError

CSV_SUFFIXES = (".csv", ".txt", ".tsv", ".dat")
DELIMITERS = ",;\t| "
NAN_WORDS = {"", "nan", "NaN", "NAN", "-nan", "NA", "N/A", "null", "NULL", "None"}
_MATRIX_COLUMN = re.compile(r"^(?P<name>.+)\[(?P<index>\d+)\]$")


class LogError(MbfgError):
    """A log that cannot be read, or a column that is not what the map says."""


@dataclass
class LogTable:
    """A log's columns. ``format``: csv, mat or npz; ``rows``: the number of data rows (for
    arrays, the longest one's: columns may differ, the importer checks the ones it maps against
    the time column); ``lines``: for CSV, the file line number of each data row (1-based)."""
    path: Path
    format: str
    rows: int
    delimiter: str = ""
    lines: np.ndarray | None = None
    _text: dict[str, list[str]] = field(default_factory=dict, repr=False)    # CSV: raw cells per column
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # mat / npz: by name

    def names(self) -> list[str]:
        """The column names as the map may write them."""
        if self.format == "csv":
            return list(self._text)
        out = []
        for name, arr in self._arrays.items():
            out.extend([f"{name}[{j}]" for j in range(arr.shape[1])] if arr.ndim == 2 else [name])
        return out

    def where(self, row: int) -> str:
        """Row ``row`` (0-based data row) for a message: 'row 12 (line 14)'."""
        line = f" (line {int(self.lines[row])})" if self.lines is not None else ""
        return f"row {row + 1}{line}"

    def column(self, name: str, integer: bool = False) -> np.ndarray:
        """The column as float64 (NaN for empty cells); ``integer``: as int64 when every cell is
        a whole number (exact where float64 is not: a time column in ns), else None."""
        if self.format == "csv":
            if name not in self._text:
                raise self._unknown(name)
            return self._csv_column(name, integer)
        arr = self._array(name)
        if integer:
            return arr.astype(np.int64) if np.issubdtype(arr.dtype, np.integer) else None
        return arr.astype(float)

    # -- helpers -------------------------------------------------------------------------------
    def _unknown(self, name: str) -> LogError:
        names = self.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        listing = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        return LogError(f"{self.path}: no column {name!r} in the log{hint} (it has: {listing})")

    def _array(self, name: str) -> np.ndarray:
        m = _MATRIX_COLUMN.match(name)
        if name in self._arrays and self._arrays[name].ndim == 1:
            return self._arrays[name]
        if m and m["name"] in self._arrays and self._arrays[m["name"]].ndim == 2:
            arr, j = self._arrays[m["name"]], int(m["index"])
            if j < arr.shape[1]:
                return arr[:, j]
        raise self._unknown(name)

    def _csv_column(self, name: str, integer: bool) -> np.ndarray | None:
        cells = self._text[name]
        if integer:
            try:
                return np.array([int(c) for c in cells], dtype=np.int64)
            except (ValueError, OverflowError):
                return None
        out = np.empty(len(cells))
        for i, c in enumerate(cells):
            c = c.strip()
            if c in NAN_WORDS:
                out[i] = np.nan
                continue
            try:
                out[i] = float(c)
            except ValueError:
                raise LogError(f"{self.path}: column {name!r}, {self.where(i)}: not a number "
                               f"({c[:40]!r})") from None
        return out


def read_log_table(path: str | Path, delimiter: str = "auto") -> LogTable:
    """Read a CSV, .mat or .npz log (see the module docstring). ``delimiter`` (CSV): ``auto``
    to sniff it, or the character. Raises LogError with one line on a file that cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise LogError(f"no such log file: {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix == ".mat":
        return _mat_table(path)
    if suffix == ".npz":
        return _npz_table(path)
    if suffix in CSV_SUFFIXES:
        return _csv_table(path, delimiter)
    raise LogError(f"{path}: unknown log format {suffix or '(no suffix)'!r} (known: "
                   f"{', '.join(CSV_SUFFIXES)} as CSV, .mat, .npz)")


def _csv_table(path: Path, delimiter: str) -> LogTable:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LogError(f"{path}: not a text file ({exc.reason})") from None
    except OSError as exc:
        raise LogError(f"{path}: cannot read it ({exc.strerror})") from None
    numbered = [(i + 1, line) for i, line in enumerate(text.splitlines())
                if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise LogError(f"{path}: no header row (the file is empty)")
    if delimiter == "auto":
        delimiter = _sniff(path, [line for _, line in numbered[:50]])
    elif len(delimiter) != 1:
        raise LogError(f"{path}: the delimiter must be one character (value: {delimiter!r})")
    reader = csv.reader([line for _, line in numbered], delimiter=delimiter,
                        skipinitialspace=delimiter == " ")
    rows = list(reader)
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise LogError(f"{path}: the header names column {dup!r} twice")
    body = rows[1:]
    width = len(header)
    for i, r in enumerate(body):
        if len(r) != width:
            raise LogError(f"{path}: row {i + 1} (line {numbered[i + 1][0]}) has {len(r)} cells, "
                           f"the header {width} (delimiter {delimiter!r})")
    columns = {h: [r[k] for r in body] for k, h in enumerate(header)}
    return LogTable(path, "csv", len(body), delimiter, np.array([n for n, _ in numbered[1:]], dtype=np.int64),
                    _text=columns)


def _sniff(path: Path, lines: list[str]) -> str:
    """The delimiter of a header + rows: csv.Sniffer's among :data:`DELIMITERS`, else the one
    that splits the header into cells (more than one) and the most rows into as many."""
    sample = "\n".join(lines)
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        pass
    best, agree = None, -1
    for d in DELIMITERS:
        counts = [len(row) for row in csv.reader(lines, delimiter=d, skipinitialspace=d == " ")]
        same = sum(c == counts[0] for c in counts[1:])
        if counts[0] > 1 and same > agree:
            best, agree = d, same
    if best is not None:
        return best
    raise LogError(f"{path}: cannot tell the delimiter from the first lines (tried "
                   f"{', '.join(repr(d) for d in DELIMITERS)}); give it in the map (delimiter)")


def _numeric_columns(path: Path, items, prefix: str = "") -> dict[str, np.ndarray]:
    """Numeric vectors (N,) and matrices (N, k) of a .mat or .npz, by name (struct fields as
    ``parent.field``); other values (text, cells, scalars) are left out."""
    out: dict[str, np.ndarray] = {}
    for name, value in items:
        if str(name).startswith("__"):
            continue
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out.update(_numeric_columns(path, value.items(), key + "."))
            continue
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf" or arr.size < 2:
            continue
        if arr.ndim == 2 and 1 in arr.shape:
            arr = arr.ravel()
        if arr.ndim in (1, 2):
            out[key] = arr
    return out


def _array_table(path: Path, fmt: str, arrays: dict[str, np.ndarray]) -> LogTable:
    if not arrays:
        raise LogError(f"{path}: no numeric vector or matrix in the {fmt} file")
    return LogTable(path, fmt, max(len(a) for a in arrays.values()), _arrays=arrays)


def _mat_table(path: Path) -> LogTable:
    import scipy.io
    with path.open("rb") as fh:
        head = fh.read(128)
    if b"MATLAB 7.3" in head or head.startswith(b"\x89HDF"):
        raise LogError(f"{path}: a MATLAB v7.3 file (HDF5), which scipy cannot read: save it with "
                       "save(file, ..., '-v7') or convert it (e.g. writematrix/writetable to CSV)")
    try:
        data = scipy.io.loadmat(str(path), simplify_cells=True)
    except NotImplementedError:
        raise LogError(f"{path}: a MATLAB v7.3 file (HDF5), which scipy cannot read: save it with "
                       "save(file, ..., '-v7') or convert it (e.g. to CSV)") from None
    except (ValueError, TypeError, OSError) as exc:
        raise LogError(f"{path}: not a MATLAB .mat file scipy can read ({exc})") from None
    return _array_table(path, "mat", _numeric_columns(path, data.items()))


def _npz_table(path: Path) -> LogTable:
    try:
        with np.load(path, allow_pickle=False) as data:
            items = [(k, data[k]) for k in data.files]
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise LogError(f"{path}: not a NumPy .npz file ({exc})") from None
    return _array_table(path, "npz", _numeric_columns(path, items))
