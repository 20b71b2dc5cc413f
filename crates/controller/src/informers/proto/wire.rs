//! The protobuf wire format, read only: a message is a run of (field number, wire type,
//! value) records. Just what decoding Kubernetes' messages needs: varints, length-delimited
//! values (strings, bytes, nested messages, packed lists), and skipping the fixed-width
//! types no scheduler-read field uses.

use std::fmt;

/// Malformed protobuf: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub(crate) String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed protobuf: {}", self.0)
    }
}

impl std::error::Error for WireError {}

pub(crate) type Result<T> = std::result::Result<T, WireError>;

/// One field's value as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// fixed32 and fixed64 (no field read here has them; kept so they can be skipped).
    Fixed,
}

impl<'a> Value<'a> {
    pub(crate) fn bytes(self, field: &str) -> Result<&'a [u8]> {
        match self {
            Value::Bytes(b) => Ok(b),
            _ => Err(WireError(format!(
                "{field}: expected a length-delimited value"
            ))),
        }
    }

    pub(crate) fn string(self, field: &str) -> Result<String> {
        let b = self.bytes(field)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| WireError(format!("{field}: not UTF-8")))
    }

    pub(crate) fn varint(self, field: &str) -> Result<u64> {
        match self {
            Value::Varint(v) => Ok(v),
            _ => Err(WireError(format!("{field}: expected a varint"))),
        }
    }

    /// int64 and int32 fields: two's complement in a varint (not zigzag).
    pub(crate) fn int64(self, field: &str) -> Result<i64> {
        self.varint(field).map(|v| v as i64)
    }

    pub(crate) fn int32(self, field: &str) -> Result<i32> {
        self.varint(field).map(|v| v as i64 as i32)
    }

    pub(crate) fn bool(self, field: &str) -> Result<bool> {
        self.varint(field).map(|v| v != 0)
    }
}

/// The fields of one message, in wire order.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }

    /// The varints of a packed repeated field's value, in order.
    pub(crate) fn packed_varints(buf: &'a [u8]) -> impl Iterator<Item = Result<u64>> + 'a {
        let mut f = Fields { buf };
        std::iter::from_fn(move || {
            if f.buf.is_empty() {
                return None;
            }
            let v = f.varint();
            if v.is_err() {
                f.buf = &[]; // nothing after a broken varint can be read
            }
            Some(v)
        })
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for (i, &b) in self.buf.iter().enumerate().take(10) {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(v);
            }
        }
        Err(WireError("truncated or overlong varint".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.buf.len() {
            return Err(WireError(format!(
                "a value of {n} bytes with {} left",
                self.buf.len()
            )));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let field = (|| {
            let key = self.varint()?;
            let number = u32::try_from(key >> 3)
                .map_err(|_| WireError(format!("field number {}", key >> 3)))?;
            let value = match key & 7 {
                0 => Value::Varint(self.varint()?),
                1 => {
                    self.take(8)?;
                    Value::Fixed
                }
                2 => {
                    let n = self.varint()?;
                    let n = usize::try_from(n).map_err(|_| WireError(format!("length {n}")))?;
                    Value::Bytes(self.take(n)?)
                }
                5 => {
                    self.take(4)?;
                    Value::Fixed
                }
                t => return Err(WireError(format!("wire type {t} of field {number}"))),
            };
            Ok((number, value))
        })();
        if field.is_err() {
            // Stop after the first error: the rest cannot be framed.
            self.buf = &[];
        }
        Some(field)
    }
}

/// A `map<string, string>` entry (key 1, value 2).
pub(crate) fn string_pair(b: &[u8], field: &str) -> Result<(String, String)> {
    let (mut k, mut v) = (String::new(), String::new());
    for f in Fields::new(b) {
        match f? {
            (1, x) => k = x.string(field)?,
            (2, x) => v = x.string(field)?,
            _ => {}
        }
    }
    Ok((k, v))
}

#[cfg(test)]
pub(crate) mod encode {
    //! A writer for tests: builds messages field by field.

    #[derive(Default)]
    pub(crate) struct Msg(pub(crate) Vec<u8>);

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    impl Msg {
        pub(crate) fn varint(mut self, field: u32, v: u64) -> Self {
            varint(&mut self.0, u64::from(field) << 3);
            varint(&mut self.0, v);
            self
        }
        pub(crate) fn bytes(mut self, field: u32, b: &[u8]) -> Self {
            varint(&mut self.0, (u64::from(field) << 3) | 2);
            varint(&mut self.0, b.len() as u64);
            self.0.extend_from_slice(b);
            self
        }
        pub(crate) fn str(self, field: u32, s: &str) -> Self {
            self.bytes(field, s.as_bytes())
        }
        pub(crate) fn msg(self, field: u32, m: Msg) -> Self {
            self.bytes(field, &m.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode::Msg;
    use super::*;

    #[test]
    fn reads_varints_strings_and_nested_messages_in_order() {
        let inner = Msg::default().str(1, "a").varint(2, 300);
        let m = Msg::default()
            .varint(1, u64::MAX)
            .msg(3, inner)
            .str(15, "é");
        let got: Vec<_> = Fields::new(&m.0).collect::<Result<_>>().unwrap();
        assert_eq!(got[0], (1, Value::Varint(u64::MAX)));
        assert_eq!(got[2].1.string("x").unwrap(), "é");
        let nested: Vec<_> = Fields::new(got[1].1.bytes("x").unwrap())
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            nested,
            vec![(1, Value::Bytes(b"a")), (2, Value::Varint(300))]
        );
        // A negative int32 travels as a ten-byte varint.
        let neg = Msg::default().varint(1, -5i64 as u64);
        let (_, v) = Fields::new(&neg.0).next().unwrap().unwrap();
        assert_eq!(v.int32("x").unwrap(), -5);
    }

    #[test]
    fn skips_fixed_width_fields_and_stops_at_truncation() {
        let mut b = vec![(1 << 3) | 1];
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&[(2 << 3) | 5, 1, 2, 3, 4]);
        b.extend_from_slice(&[(3 << 3) | 2, 5, b'x']);
        let mut f = Fields::new(&b);
        assert_eq!(f.next().unwrap().unwrap(), (1, Value::Fixed));
        assert_eq!(f.next().unwrap().unwrap(), (2, Value::Fixed));
        let e = f.next().unwrap().unwrap_err();
        assert!(e.0.contains("5 bytes with 1 left"), "{e}");
        assert!(f.next().is_none());
        let e = Fields::new(&[(1 << 3) | 3]).next().unwrap().unwrap_err();
        assert!(e.0.contains("wire type 3"), "{e}");
    }
}
