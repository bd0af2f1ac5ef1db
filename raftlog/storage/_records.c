/* The records of a Kafka RecordBatch v2, read in C: the one hot loop of every read path.
 *
 * raftlog.storage.batch frames, CRC-checks and decompresses a batch; this module reads what is left,
 * the records section, which is `count` records of zig-zag varints and byte strings:
 *
 *     length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
 *     key_length varint | key | value_length varint | value |
 *     header_count varint | (key_length varint | key (UTF-8) | value_length varint | value)*
 *
 * (a length of -1 is null; a header key is never null). Every read is bounded by the record's own
 * length and the section's end, and anything that does not add up (a varint that runs on, a length
 * past its record, offset deltas that do not rise or that pass the batch's span, bytes left over) raises
 * ValueError naming the record and what is wrong: a batch from the network goes through `check` before
 * anything is stored. Why C and not the compiled codec of a Kafka client library: docs/decisions/0012.
 *
 * `span` is the batch's last offset delta + 1. A producer's batch holds `count` == `span` records, whose
 * offset deltas are then 0, 1, ...; a batch that compaction rewrote keeps fewer, their deltas rising
 * within the span (raftlog.storage.compaction), and may keep none.
 *
 * rows(section, count, span, first_timestamp, fixed_timestamp)
 *     -> list of (timestamp, key, value, headers)
 * records(section, count, span, base_offset, first_timestamp, fixed_timestamp, record_type, timestamp_type)
 *     -> tuple of record_type(offset, timestamp, key, value, headers, timestamp_type)
 * check(section, count, span, first_timestamp) -> (lowest timestamp, highest timestamp)
 *
 * fixed_timestamp is None for CreateTime (a record's time is first_timestamp + its delta) or the
 * batch's max timestamp for LogAppendTime (every record's time). headers is a tuple of (str, bytes or
 * None) pairs, the empty tuple when there are none. record_type must be a subclass of tuple.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
} Cursor;

/* Set a ValueError naming the record; returns -1 so callers can `return fail(...)`. */
static int fail(Py_ssize_t index, const char *what) {
    PyErr_Format(PyExc_ValueError, "record %zd: %s", index, what);
    return -1;
}

/* A zig-zag varint of at most max_bytes bytes (5 for an int32, 10 for an int64). */
static int read_zigzag(Cursor *c, int max_bytes, int64_t *out, Py_ssize_t index) {
    uint64_t value = 0;
    for (int shift = 0, n = 0; n < max_bytes; n++, shift += 7) {
        if (c->at >= c->end) return fail(index, "a varint runs past the end of its record");
        unsigned char byte = *c->at++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            int64_t decoded = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
            if (max_bytes == 5 && (decoded < INT32_MIN || decoded > INT32_MAX))
                return fail(index, "a varint does not fit 32 bits");
            *out = decoded;
            return 0;
        }
    }
    return fail(index, "a varint is longer than its type allows");
}

/* A length-prefixed byte string: *out is the bytes, or None for length -1 when nullable. */
static int read_bytes(Cursor *c, int nullable, PyObject **out, Py_ssize_t index, const char *what) {
    int64_t length;
    if (read_zigzag(c, 5, &length, index) < 0) return -1;
    if (length == -1 && nullable) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return 0;
    }
    if (length < 0) {
        PyErr_Format(PyExc_ValueError, "record %zd: %s length %lld", index, what, (long long)length);
        return -1;
    }
    if (length > c->end - c->at) {
        PyErr_Format(PyExc_ValueError, "record %zd: %s of %lld bytes runs past the end of its record",
                     index, what, (long long)length);
        return -1;
    }
    *out = PyBytes_FromStringAndSize((const char *)c->at, (Py_ssize_t)length);
    c->at += length;
    return *out == NULL ? -1 : 0;
}

/* The parts of one record. Owned references when `materialize`, else all NULL. */
typedef struct {
    int64_t timestamp;
    int64_t offset_delta;
    PyObject *key;
    PyObject *value;
    PyObject *headers;
} Parsed;

static void release(Parsed *r) {
    Py_CLEAR(r->key);
    Py_CLEAR(r->value);
    Py_CLEAR(r->headers);
}

static PyObject *read_headers(Cursor *c, int64_t count, Py_ssize_t index, int materialize) {
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "record %zd: header count %lld", index, (long long)count);
        return NULL;
    }
    if (count > c->end - c->at) { /* each header takes at least two bytes */
        PyErr_Format(PyExc_ValueError, "record %zd: %lld headers run past the end of its record", index,
                     (long long)count);
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count); /* the shared empty tuple for 0 */
    if (headers == NULL) return NULL;
    for (int64_t h = 0; h < count; h++) {
        int64_t key_length;
        if (read_zigzag(c, 5, &key_length, index) < 0) goto error;
        if (key_length < 0 || key_length > c->end - c->at) {
            fail(index, "a header key length is negative or runs past the end of its record");
            goto error;
        }
        /* decoded even when not kept: a key that is not UTF-8 is refused at the door */
        PyObject *key = PyUnicode_DecodeUTF8((const char *)c->at, (Py_ssize_t)key_length, "strict");
        if (key == NULL) {
            PyErr_Clear();
            fail(index, "a header key is not UTF-8");
            goto error;
        }
        c->at += key_length;
        PyObject *value = NULL;
        if (read_bytes(c, 1, &value, index, "header value") < 0) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyTuple_SET_ITEM(headers, (Py_ssize_t)h, pair);
    }
    if (!materialize) {
        Py_DECREF(headers);
        Py_INCREF(Py_None);
        return Py_None;
    }
    return headers;
error:
    Py_DECREF(headers);
    return NULL;
}

/* Record `index` at the cursor, which moves past it: its offset delta above `previous_delta` and below
 * `span`. With `materialize` false only checks it. */
static int read_record(Cursor *section, Py_ssize_t index, int64_t first_timestamp, int64_t previous_delta,
                       int64_t span, Parsed *out, int materialize) {
    int64_t length, timestamp_delta, offset_delta, header_count;
    out->key = out->value = out->headers = NULL;
    if (read_zigzag(section, 5, &length, index) < 0) return -1;
    if (length < 1 || length > section->end - section->at) {
        PyErr_Format(PyExc_ValueError, "record %zd: length %lld with %zd bytes left in the batch", index,
                     (long long)length, (Py_ssize_t)(section->end - section->at));
        return -1;
    }
    Cursor c = {section->at, section->at + length};
    section->at += length;
    c.at++; /* attributes: unused in v2 */
    if (read_zigzag(&c, 10, &timestamp_delta, index) < 0) return -1;
    if (read_zigzag(&c, 5, &offset_delta, index) < 0) return -1;
    if (offset_delta <= previous_delta || offset_delta >= span) {
        PyErr_Format(PyExc_ValueError, "record %zd has offset delta %lld, after %lld in a span of %lld",
                     index, (long long)offset_delta, (long long)previous_delta, (long long)span);
        return -1;
    }
    out->offset_delta = offset_delta;
    if (__builtin_add_overflow(first_timestamp, timestamp_delta, &out->timestamp))
        return fail(index, "its timestamp does not fit 64 bits");
    if (read_bytes(&c, 1, &out->key, index, "key") < 0) goto error;
    if (read_bytes(&c, 1, &out->value, index, "value") < 0) goto error;
    if (read_zigzag(&c, 5, &header_count, index) < 0) goto error;
    out->headers = read_headers(&c, header_count, index, materialize);
    if (out->headers == NULL) goto error;
    if (c.at != c.end) {
        PyErr_Format(PyExc_ValueError, "record %zd: %zd bytes of its length are not part of it", index,
                     (Py_ssize_t)(c.end - c.at));
        goto error;
    }
    if (!materialize) release(out);
    return 0;
error:
    release(out);
    return -1;
}

static int no_bytes_left(const Cursor *c) {
    if (c->at == c->end) return 0;
    PyErr_Format(PyExc_ValueError, "%zd bytes after the last record", (Py_ssize_t)(c->end - c->at));
    return -1;
}

static int parse_fixed(PyObject *fixed, int *has_fixed, int64_t *fixed_timestamp) {
    *has_fixed = fixed != Py_None;
    if (!*has_fixed) return 0;
    *fixed_timestamp = PyLong_AsLongLong(fixed);
    return (*fixed_timestamp == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int check_count(Py_ssize_t count, Py_ssize_t span, const Py_buffer *view) {
    if (count < 0 || count > view->len) { /* a record takes at least 7 bytes */
        PyErr_Format(PyExc_ValueError, "%zd records cannot fit %zd bytes", count, view->len);
        return -1;
    }
    if (span < count) {
        PyErr_Format(PyExc_ValueError, "%zd records cannot fit a span of %zd offsets", count, span);
        return -1;
    }
    return 0;
}

/* Records of a batch mostly share their timestamp (a producer's linger, LogAppendTime): the int object
 * of the previous record is handed out again while it is the same, instead of a new one per record. */
typedef struct {
    int64_t value;
    PyObject *last; /* owned */
} Timestamps;

static PyObject *timestamp_object(Timestamps *t, int64_t value) {
    if (t->last == NULL || t->value != value) {
        PyObject *made = PyLong_FromLongLong(value);
        if (made == NULL) return NULL;
        Py_XSETREF(t->last, made);
        t->value = value;
    }
    Py_INCREF(t->last);
    return t->last;
}

/* What each record of a section becomes: for `rows`, a (timestamp, key, value, headers) tuple in a list;
 * for `records`, a record_type(offset, timestamp, key, value, headers, kind) in a tuple. */
typedef struct {
    PyTypeObject *record_type; /* NULL: rows */
    long long base_offset;
    PyObject *kind;
} Shape;

/* One record as `shape` says, taking the references of `timestamp` and of r's parts (released on
 * failure). */
static PyObject *shaped(const Shape *shape, PyObject *timestamp, Parsed *r) {
    PyObject *offset = NULL, *item = NULL;
    if (shape->record_type == NULL) {
        item = PyTuple_New(4);
    } else {
        offset = PyLong_FromLongLong(shape->base_offset + r->offset_delta);
        item = offset == NULL ? NULL : shape->record_type->tp_alloc(shape->record_type, 6);
    }
    if (item == NULL) {
        Py_XDECREF(offset);
        Py_DECREF(timestamp);
        release(r);
        return NULL;
    }
    Py_ssize_t at = 0;
    if (offset != NULL) PyTuple_SET_ITEM(item, at++, offset);
    PyTuple_SET_ITEM(item, at++, timestamp);
    PyTuple_SET_ITEM(item, at++, r->key);
    PyTuple_SET_ITEM(item, at++, r->value);
    PyTuple_SET_ITEM(item, at++, r->headers);
    if (offset != NULL) {
        Py_INCREF(shape->kind);
        PyTuple_SET_ITEM(item, at, shape->kind);
    }
    return item;
}

/* The `count` records of the section in `view` as `shape` says; releases `view`. */
static PyObject *read_section(Py_buffer *view, Py_ssize_t count, Py_ssize_t span, int64_t first_timestamp,
                              PyObject *fixed, const Shape *shape) {
    int has_fixed;
    int64_t fixed_timestamp = 0;
    PyObject *out = NULL;
    Timestamps times = {0, NULL}; /* before any goto: `done` releases it */
    Cursor c;
    int64_t previous_delta = -1;
    if (parse_fixed(fixed, &has_fixed, &fixed_timestamp) < 0 || check_count(count, span, view) < 0)
        goto done;
    if (shape->record_type != NULL &&
        (shape->base_offset < 0 || shape->base_offset > INT64_MAX - span)) {
        PyErr_Format(PyExc_ValueError, "base offset %lld out of range", shape->base_offset);
        goto done;
    }
    out = shape->record_type == NULL ? PyList_New(count) : PyTuple_New(count);
    if (out == NULL) goto done;
    c = (Cursor){view->buf, (const unsigned char *)view->buf + view->len};
    for (Py_ssize_t i = 0; i < count; i++) {
        Parsed r;
        if (read_record(&c, i, first_timestamp, previous_delta, span, &r, 1) < 0) goto fail;
        previous_delta = r.offset_delta;
        PyObject *timestamp = timestamp_object(&times, has_fixed ? fixed_timestamp : r.timestamp);
        if (timestamp == NULL) {
            release(&r);
            goto fail;
        }
        PyObject *item = shaped(shape, timestamp, &r);
        if (item == NULL) goto fail;
        if (shape->record_type == NULL)
            PyList_SET_ITEM(out, i, item);
        else
            PyTuple_SET_ITEM(out, i, item);
    }
    if (no_bytes_left(&c) == 0) goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(times.last);
    PyBuffer_Release(view);
    return out;
}

static PyObject *rows(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, span;
    long long first_timestamp;
    PyObject *fixed;
    if (!PyArg_ParseTuple(args, "y*nnLO:rows", &view, &count, &span, &first_timestamp, &fixed)) return NULL;
    Shape shape = {NULL, 0, NULL};
    return read_section(&view, count, span, first_timestamp, fixed, &shape);
}

static PyObject *records(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, span;
    Shape shape;
    long long first_timestamp;
    PyObject *fixed;
    if (!PyArg_ParseTuple(args, "y*nnLLOO!O:records", &view, &count, &span, &shape.base_offset,
                          &first_timestamp, &fixed, &PyType_Type, &shape.record_type, &shape.kind))
        return NULL;
    if (!PyType_IsSubtype(shape.record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a subclass of tuple");
        PyBuffer_Release(&view);
        return NULL;
    }
    return read_section(&view, count, span, first_timestamp, fixed, &shape);
}

static PyObject *check(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, span;
    long long first_timestamp;
    if (!PyArg_ParseTuple(args, "y*nnL:check", &view, &count, &span, &first_timestamp)) return NULL;
    PyObject *out = NULL;
    int64_t low = INT64_MAX, high = INT64_MIN, previous_delta = -1;
    if (check_count(count, span, &view) < 0) goto done;
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "a batch holds at least one record");
        goto done;
    }
    Cursor c = {view.buf, (const unsigned char *)view.buf + view.len};
    for (Py_ssize_t i = 0; i < count; i++) {
        Parsed r;
        if (read_record(&c, i, first_timestamp, previous_delta, span, &r, 0) < 0) goto done;
        previous_delta = r.offset_delta;
        if (r.timestamp < low) low = r.timestamp;
        if (r.timestamp > high) high = r.timestamp;
    }
    if (no_bytes_left(&c) == 0) out = Py_BuildValue("(LL)", (long long)low, (long long)high);
done:
    PyBuffer_Release(&view);
    return out;
}

/* -- encoding ------------------------------------------------------------------------------------ */

typedef struct {
    unsigned char *data;
    Py_ssize_t size, capacity;
} Out;

static int reserve(Out *o, Py_ssize_t more) {
    if (o->capacity - o->size >= more) return 0;
    Py_ssize_t capacity = o->capacity * 2;
    if (capacity < o->size + more) capacity = o->size + more;
    unsigned char *grown = PyMem_Realloc(o->data, (size_t)capacity);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = grown;
    o->capacity = capacity;
    return 0;
}

/* A zig-zag varint at o->data + at (the caller reserved 10 bytes); returns its size. */
static int put_zigzag(unsigned char *at, int64_t value) {
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int n = 0;
    while (z >= 0x80) {
        at[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    at[n++] = (unsigned char)z;
    return n;
}

static int zigzag_size(int64_t value) {
    unsigned char scratch[10];
    return put_zigzag(scratch, value);
}

/* A nullable byte string's length and bytes: None, bytes, or any object with the buffer protocol. */
typedef struct {
    Py_buffer view;
    int is_null, has_view;
} Field;

static int field_of(PyObject *value, Field *f, Py_ssize_t index, const char *what) {
    f->has_view = 0;
    f->is_null = value == Py_None;
    if (f->is_null) return 0;
    if (PyObject_GetBuffer(value, &f->view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "record %zd: %s must be bytes or None, got %s", index, what,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    f->has_view = 1;
    if (f->view.len > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "record %zd: %s is longer than 2 GiB", index, what);
        return -1;
    }
    return 0;
}

static void field_release(Field *f) {
    if (f->has_view) PyBuffer_Release(&f->view);
    f->has_view = 0;
}

static Py_ssize_t field_size(const Field *f) {
    return f->is_null ? 1 : zigzag_size(f->view.len) + f->view.len;
}

static void put_field(Out *o, const Field *f) {
    if (f->is_null) {
        o->size += put_zigzag(o->data + o->size, -1);
        return;
    }
    o->size += put_zigzag(o->data + o->size, f->view.len);
    memcpy(o->data + o->size, f->view.buf, (size_t)f->view.len);
    o->size += f->view.len;
}

static PyObject *attr_value, *attr_key, *attr_headers, *attr_timestamp, *attr_offset;

/* The timestamp of a record: its own (an int >= 0, not a bool) or now_ms when it has none. */
static int record_timestamp(PyObject *record, int64_t now_ms, int64_t *out, Py_ssize_t index) {
    PyObject *given = PyObject_GetAttr(record, attr_timestamp);
    if (given == NULL) return -1;
    int result = 0;
    if (given == Py_None) {
        if (now_ms < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd: timestamp %lld before the epoch", index,
                         (long long)now_ms);
            result = -1;
        }
        *out = now_ms;
    } else if (!PyLong_Check(given) || PyBool_Check(given)) {
        PyErr_Format(PyExc_TypeError, "record %zd: timestamp_ms must be an int, got %s", index,
                     Py_TYPE(given)->tp_name);
        result = -1;
    } else {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(given, &overflow);
        if (value == -1 && PyErr_Occurred()) {
            result = -1;
        } else if (overflow || value < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd: timestamp_ms %R must be ms since the epoch", index,
                         given);
            result = -1;
        } else {
            *out = value;
        }
    }
    Py_DECREF(given);
    return result;
}

/* A header's (key, value): a 2-tuple or list of a str and bytes or None; the key as UTF-8. Borrowed. */
static int header_parts(PyObject *header, Py_ssize_t index, const char **key, Py_ssize_t *key_size,
                        PyObject **value) {
    int pair = (PyTuple_Check(header) || PyList_Check(header)) && PySequence_Size(header) == 2;
    PyObject *first = pair ? PySequence_Fast_GET_ITEM(header, 0) : NULL;
    *value = pair ? PySequence_Fast_GET_ITEM(header, 1) : NULL;
    if (!pair || !PyUnicode_Check(first) || !(*value == Py_None || PyBytes_Check(*value))) {
        PyErr_Format(PyExc_TypeError, "record %zd: headers must be (str, bytes or None) pairs, got %R", index,
                     header);
        return -1;
    }
    *key = PyUnicode_AsUTF8AndSize(first, key_size); /* kept by the str: cheap the second time */
    return *key == NULL ? -1 : 0;
}

static Py_ssize_t header_size(PyObject *header, Py_ssize_t index) {
    const char *key;
    Py_ssize_t key_size;
    PyObject *value;
    if (header_parts(header, index, &key, &key_size, &value) < 0) return -1;
    if (key_size > INT32_MAX || (value != Py_None && PyBytes_GET_SIZE(value) > INT32_MAX)) {
        PyErr_Format(PyExc_ValueError, "record %zd: a header is longer than 2 GiB", index);
        return -1;
    }
    Py_ssize_t size = zigzag_size(key_size) + key_size;
    return size + (value == Py_None ? 1 : zigzag_size(PyBytes_GET_SIZE(value)) + PyBytes_GET_SIZE(value));
}

static void put_header(Out *o, PyObject *header, Py_ssize_t index) { /* checked by header_size */
    const char *key;
    Py_ssize_t key_size;
    PyObject *value;
    header_parts(header, index, &key, &key_size, &value);
    o->size += put_zigzag(o->data + o->size, key_size);
    memcpy(o->data + o->size, key, (size_t)key_size);
    o->size += key_size;
    if (value == Py_None) {
        o->size += put_zigzag(o->data + o->size, -1);
        return;
    }
    o->size += put_zigzag(o->data + o->size, PyBytes_GET_SIZE(value));
    memcpy(o->data + o->size, PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value));
    o->size += PyBytes_GET_SIZE(value);
}

/* Record `index` (offset delta `offset_delta`) appended to o: its size first, then its bytes in place. */
static int encode_record(Out *o, PyObject *record, Py_ssize_t index, int64_t offset_delta, int64_t timestamp,
                         int64_t first) {
    PyObject *key = NULL, *value = NULL, *headers = NULL, *items = NULL;
    Field k = {.has_view = 0}, v = {.has_view = 0};
    int result = -1;
    int64_t delta;
    if (__builtin_sub_overflow(timestamp, first, &delta)) {
        PyErr_Format(PyExc_ValueError, "record %zd: timestamp %lld too far from the first record's", index,
                     (long long)timestamp);
        goto done;
    }
    if ((key = PyObject_GetAttr(record, attr_key)) == NULL) goto done;
    if ((value = PyObject_GetAttr(record, attr_value)) == NULL) goto done;
    if ((headers = PyObject_GetAttr(record, attr_headers)) == NULL) goto done;
    if (field_of(key, &k, index, "key") < 0 || field_of(value, &v, index, "value") < 0) goto done;
    if ((items = PySequence_Fast(headers, "headers must be a sequence")) == NULL) goto done;
    Py_ssize_t header_count = PySequence_Fast_GET_SIZE(items);
    Py_ssize_t body = 1 + zigzag_size(delta) + zigzag_size(offset_delta) + field_size(&k) + field_size(&v) +
                      zigzag_size(header_count);
    for (Py_ssize_t h = 0; h < header_count; h++) {
        Py_ssize_t size = header_size(PySequence_Fast_GET_ITEM(items, h), index);
        if (size < 0) goto done;
        body += size;
    }
    if (body > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "record %zd is longer than 2 GiB", index);
        goto done;
    }
    if (reserve(o, 5 + body) < 0) goto done;
    o->size += put_zigzag(o->data + o->size, body);
    Py_ssize_t body_at = o->size;
    o->data[o->size++] = 0; /* attributes */
    o->size += put_zigzag(o->data + o->size, delta);
    o->size += put_zigzag(o->data + o->size, offset_delta);
    put_field(o, &k);
    put_field(o, &v);
    o->size += put_zigzag(o->data + o->size, header_count);
    for (Py_ssize_t h = 0; h < header_count; h++) put_header(o, PySequence_Fast_GET_ITEM(items, h), index);
    if (o->size - body_at != body) {
        PyErr_Format(PyExc_SystemError, "record %zd: wrote %zd bytes, sized %zd", index, o->size - body_at,
                     body);
        goto done;
    }
    result = 0;
done:
    field_release(&k);
    field_release(&v);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(items);
    return result;
}

/* The offset delta of a record kept by compaction: its `offset` less `base_offset`, above the previous
 * record's and within 32 bits. */
static int kept_delta(PyObject *record, long long base_offset, int64_t previous, int64_t *out,
                      Py_ssize_t index) {
    PyObject *given = PyObject_GetAttr(record, attr_offset);
    if (given == NULL) return -1;
    long long offset = PyLong_AsLongLong(given);
    Py_DECREF(given);
    if (offset == -1 && PyErr_Occurred()) return -1;
    if (offset - base_offset <= previous || offset - base_offset > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "record %zd: offset %lld does not follow base %lld and delta %lld",
                     index, offset, base_offset, (long long)previous);
        return -1;
    }
    *out = offset - base_offset;
    return 0;
}

/* encode(records, now_ms, room[, base_offset]) -> (bytearray, first_timestamp, max_timestamp): `room`
 * zero bytes (for the batch header) then the records section of `records` (objects with value, key,
 * headers and timestamp_ms, as ProducerRecord), timestamps relative to the first's, offset deltas 0, 1,
 * ...; or, given `base_offset`, each record's own offset less it (records with an offset, as Record:
 * those compaction keeps of a stored batch). */
static PyObject *encode(PyObject *module, PyObject *args) {
    PyObject *sequence;
    long long now_ms, base_offset = -1;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "OLn|L:encode", &sequence, &now_ms, &room, &base_offset)) return NULL;
    PyObject *items = PySequence_Fast(sequence, "records must be a sequence");
    if (items == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    PyObject *out = NULL;
    int64_t first = 0, high = INT64_MIN, offset_delta = -1;
    Out o = {NULL, 0, 0};
    if (room < 0 || reserve(&o, room + count * 16 + 64) < 0) goto done;
    memset(o.data, 0, (size_t)room);
    o.size = room;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = PySequence_Fast_GET_ITEM(items, i);
        int64_t timestamp;
        if (record_timestamp(record, now_ms, &timestamp, i) < 0) goto done;
        if (i == 0) first = timestamp;
        if (timestamp > high) high = timestamp;
        if (base_offset < 0)
            offset_delta = i;
        else if (kept_delta(record, base_offset, offset_delta, &offset_delta, i) < 0)
            goto done;
        if (encode_record(&o, record, i, offset_delta, timestamp, first) < 0) goto done;
    }
    PyObject *data = PyByteArray_FromStringAndSize((const char *)o.data, o.size);
    if (data != NULL) out = Py_BuildValue("(NLL)", data, (long long)first, (long long)high);
done:
    PyMem_Free(o.data);
    Py_DECREF(items);
    return out;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode(records, now_ms, room[, base_offset]) -> (bytearray, first_ts, max_ts)"},
    {"rows", rows, METH_VARARGS, "rows(section, count, span, first_timestamp, fixed_timestamp) -> list"},
    {"records", records, METH_VARARGS,
     "records(section, count, span, base_offset, first_timestamp, fixed_timestamp, record_type, kind) "
     "-> tuple"},
    {"check", check, METH_VARARGS, "check(section, count, span, first_timestamp) -> (low, high)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "raftlog.storage._records",
    .m_doc = "The records section of a Kafka RecordBatch v2, read in C (see raftlog/storage/_records.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__records(void) {
    attr_value = PyUnicode_InternFromString("value");
    attr_key = PyUnicode_InternFromString("key");
    attr_headers = PyUnicode_InternFromString("headers");
    attr_timestamp = PyUnicode_InternFromString("timestamp_ms");
    attr_offset = PyUnicode_InternFromString("offset");
    if (!attr_value || !attr_key || !attr_headers || !attr_timestamp || !attr_offset) return NULL;
    return PyModule_Create(&module);
}
