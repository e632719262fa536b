# Pickling what objects share in memory, for kernel.py's snapshots: NumPy views and the
# pandas columns taken from a frame. Imported by the kernel at its start (its functions are
# referenced by name, as runtimectl_views.NAME, from snapshots: keep their names and
# arguments). Stdlib only; numpy and pandas are only touched through objects the session made.

import types

# NumPy arrays. A view (an array whose memory is another's) is pickled as what it is: its
# owner (the array that holds the memory, or a bytes/bytearray), which the pickler stores once
# however many views share it, and the offset, shape, dtype, strides and writeable flag of the
# view into it. An owner is stored as its raw bytes and rebuilt with np.ndarray(buffer=...) over
# them, so that a view rebuilt over it has it as its base (numpy's own _frombuffer leaves an
# intermediate array between them, to which numpy then collapses the view's base). What cannot be
# rebuilt as a view (a view of a memmap or an mmap, a masked array, a view whose owner is not laid
# out contiguously) is pickled as numpy pickles it, a copy, marked so that the restore names it.

def array_reduce(a, ndarray):
    b = a.base
    if type(a) is ndarray:
        if b is None:
            return _owner_reduce(a)
        owner = b
        if type(b) is memoryview and type(b.obj) in (bytes, bytearray):
            owner = b.obj                   # np.frombuffer(bytearray): the view's base is a memoryview
        if type(owner) is ndarray or type(owner) in (bytes, bytearray):
            r = _view_reduce(a, owner, ndarray)
            if r is not None:
                return r
    if b is None or type(b) is bytes:
        return NotImplemented               # nothing is shared that can be written
    rv = a.__reduce_ex__(5)
    if not isinstance(rv, tuple) or len(rv) < 2:
        return NotImplemented
    reason = "a view of a %s.%s, which a snapshot cannot keep shared: came back as a copy" % (
        type(b).__module__, type(b).__qualname__)
    return (_rebuilt_copy, (reason, rv[0]) + tuple(rv[1])) + tuple(rv[2:])


def _owner_reduce(a):
    """An array that owns its memory, as its bytes and layout (see above); NotImplemented where
    numpy's own pickling applies (object dtypes, dtypes without a buffer form such as datetime64)."""
    c = a.flags.c_contiguous
    if a.dtype.hasobject or a.dtype.itemsize == 0 or not (c or a.flags.f_contiguous):
        return NotImplemented
    import pickle
    try:
        buf = pickle.PickleBuffer(a if c else a.T)
    except (ValueError, TypeError, BufferError):
        return NotImplemented
    return (_array_from_buffer, (buf, a.dtype, a.shape, "C" if c else "F"))


def _array_from_buffer(buf, dtype, shape, order):
    """Counterpart of _owner_reduce (referenced by name from snapshots)."""
    import numpy
    return numpy.ndarray(shape, dtype, buffer=buf, order=order)


def _address(a):
    return a.__array_interface__["data"][0]


def _view_reduce(v, owner, ndarray):
    """v as a view into owner, or None when it cannot be rebuilt as one."""
    if type(owner) is ndarray:
        if not (owner.flags.c_contiguous or owner.flags.f_contiguous) or owner.dtype.hasobject != v.dtype.hasobject:
            return None
        start = _address(owner)
    else:
        if not len(owner):
            return None
        import numpy
        start = _address(numpy.frombuffer(owner, numpy.uint8))
    offset = _address(v) - start
    try:   # the very view, rebuilt from the live owner: what the restore will do
        t = ndarray(v.shape, v.dtype, buffer=owner, offset=offset, strides=v.strides)
    except (ValueError, TypeError, BufferError):
        return None
    if _address(t) != _address(v):
        return None
    return (_array_view, (owner, offset, v.shape, v.dtype, v.strides, bool(v.flags.writeable)))


def _array_view(owner, offset, shape, dtype, strides, writeable):
    """Counterpart of _view_reduce (referenced by name from snapshots)."""
    import numpy
    a = numpy.ndarray(shape, dtype, buffer=owner, offset=offset, strides=strides)
    if not writeable:
        a.flags.writeable = False
    elif not a.flags.writeable:
        try:
            a.flags.writeable = True
        except ValueError:
            pass
    return a


COPIES = []    # (object, reason) of the arrays a restore rebuilt as copies, until it names them


def _rebuilt_copy(reason, func, *args):
    """An array whose sharing a snapshot could not keep, rebuilt by numpy's own reducer func and
    noted for the restore report (referenced by name from snapshots)."""
    o = func(*args)
    COPIES.append((o, reason))
    return o


def names_holding(values, objs, limit=1000000):
    """{id(o): the first name of values whose object graph holds o}, for o in objs: a walk over
    gc referents, not into classes, modules or functions (their globals are the whole namespace),
    of at most `limit` objects."""
    import gc
    want = {id(o) for o in objs}
    found = {}
    seen = set()
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    for name, v in values.items():
        stack = [v]
        while stack and len(seen) < limit and len(found) < len(want):
            o = stack.pop()
            i = id(o)
            if i in seen:
                continue
            seen.add(i)
            if i in want and i not in found:
                found[i] = name
            if not isinstance(o, skip):
                stack.extend(gc.get_referents(o))
    return found


def column_reduce(s):
    """A Series that is its DataFrame's cached column (df["col"]), pickled with that relation,
    which pandas keeps in weak references: restored, df["col"] is the same object again and
    pandas' own rules (its SettingWithCopyWarning, its cache updates) apply to it as before."""
    try:
        item, ref = s.__dict__.get("_cacher") or (None, None)
        frame = ref() if ref is not None else None
        if frame is None or frame._item_cache.get(item) is not s:
            return NotImplemented
        rv = s.__reduce_ex__(5)
    except Exception:  # noqa: BLE001 - another pandas: pickled as pandas pickles it
        return NotImplemented
    if not isinstance(rv, tuple) or len(rv) < 2:
        return NotImplemented
    return (_cached_column, (item, frame, rv[0]) + tuple(rv[1])) + tuple(rv[2:])


def _cached_column(item, frame, func, *args):
    """Counterpart of column_reduce (referenced by name from snapshots)."""
    o = func(*args)
    try:
        import weakref
        object.__setattr__(o, "_cacher", (item, weakref.ref(frame)))
        frame._item_cache[item] = o
    except Exception:  # noqa: BLE001 - the column stays a view of the frame's memory all the same
        pass
    return o
