//! Sprig's hashes and encodings: `sha1sum`, `sha256sum`, `sha512sum`, `adler32sum`, base32 and
//! base64 as Go's `encoding` packages write and read them.

use gtmpl_ng::Value;

use super::args::{R, s, want};

pub(super) fn sha256sum(a: &[Value]) -> R {
    use sha2::{Digest, Sha256};
    want(a, "sha256sum", 1)?;
    Ok(hex(&Sha256::digest(s(&a[0]).as_bytes())).into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn sha1sum(a: &[Value]) -> R {
    want(a, "sha1sum", 1)?;
    Ok(sha1_smol::Sha1::from(s(&a[0]).as_bytes())
        .digest()
        .to_string()
        .into())
}

pub(super) fn sha512sum(a: &[Value]) -> R {
    use sha2::{Digest, Sha512};
    want(a, "sha512sum", 1)?;
    Ok(hex(&Sha512::digest(s(&a[0]).as_bytes())).into())
}

/// Go's `hash/adler32`, printed in decimal as Sprig prints it.
pub(super) fn adler32sum(a: &[Value]) -> R {
    want(a, "adler32sum", 1)?;
    let (mut x, mut y) = (1u32, 0u32);
    for b in s(&a[0]).bytes() {
        x = (x + u32::from(b)) % 65521;
        y = (y + x) % 65521;
    }
    Ok(((y << 16) | x).to_string().into())
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// `base32.StdEncoding` (RFC 4648, padded).
pub(super) fn b32enc(a: &[Value]) -> R {
    want(a, "b32enc", 1)?;
    let data = s(&a[0]).into_bytes();
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for k in 0..8 {
            if k < chars {
                out.push(B32[((bits >> (35 - 5 * k)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(out.into())
}

/// The inverse; invalid input gives Go's error text, as Sprig returns it (encoding/base32's
/// `DecodeString`: newlines dropped, then `decode`, whose offsets are those of its
/// `CorruptInputError`s; anything after the padding is not read).
pub(super) fn b32dec(a: &[Value]) -> R {
    want(a, "b32dec", 1)?;
    let text = s(&a[0]);
    let src: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'\r' | b'\n'))
        .collect();
    Ok(match go_b32_decode(&src) {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(at) => format!("illegal base32 data at input byte {at}"),
    }
    .into())
}

fn go_b32_decode(mut src: &[u8]) -> Result<Vec<u8>, usize> {
    let olen = src.len();
    let mut out = Vec::new();
    let mut end = false;
    while !src.is_empty() && !end {
        let mut dbuf = [0u8; 8];
        let mut dlen = 8;
        let mut j = 0;
        while j < 8 {
            let Some((&c, rest)) = src.split_first() else {
                return Err(olen - j);
            };
            src = rest;
            if c == b'=' && j >= 2 && src.len() < 8 {
                if src.len() + j < 7 {
                    return Err(olen);
                }
                for k in 0..7 - j {
                    if src.len() > k && src[k] != b'=' {
                        return Err(olen - src.len() + k - 1);
                    }
                }
                dlen = j;
                end = true;
                if matches!(dlen, 1 | 3 | 6) {
                    return Err(olen - src.len() - 1);
                }
                break;
            }
            let Some(v) = B32.iter().position(|x| *x == c) else {
                return Err(olen - src.len() - 1);
            };
            dbuf[j] = v as u8;
            j += 1;
        }
        let d = dbuf;
        let bytes = [
            d[0] << 3 | d[1] >> 2,
            d[1] << 6 | d[2] << 1 | d[3] >> 4,
            d[3] << 4 | d[4] >> 1,
            d[4] << 7 | d[5] << 2 | d[6] >> 3,
            d[6] << 5 | d[7],
        ];
        let n = match dlen {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => 0,
        };
        out.extend_from_slice(&bytes[..n]);
    }
    Ok(out)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn b64enc(a: &[Value]) -> R {
    want(a, "b64enc", 1)?;
    let data = s(&a[0]).into_bytes();
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(out.into())
}

/// encoding/base64's `StdEncoding.DecodeString`, as Sprig returns it: the bytes, or the
/// error's text with Go's offset (`decodeQuantum`: `\r` and `\n` skipped, padding checked,
/// trailing data after it an error).
pub(super) fn b64dec(a: &[Value]) -> R {
    want(a, "b64dec", 1)?;
    let text = s(&a[0]);
    Ok(match go_b64_decode(text.as_bytes()) {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(at) => format!("illegal base64 data at input byte {at}"),
    }
    .into())
}

fn go_b64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut out = Vec::new();
    let mut si = 0;
    while si < src.len() {
        let mut dbuf = [0u8; 4];
        let mut dlen = 4;
        let mut trailing = None;
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padded: a quantum cut short is an error.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = B64.iter().position(|x| *x == c) {
                dbuf[j] = v as u8;
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(si - 1);
            }
            if j == 2 {
                while si < src.len() && newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                trailing = Some(si);
            }
            dlen = j;
            break;
        }
        let val = u32::from(dbuf[0]) << 18
            | u32::from(dbuf[1]) << 12
            | u32::from(dbuf[2]) << 6
            | u32::from(dbuf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
        if let Some(at) = trailing {
            return Err(at);
        }
    }
    Ok(out)
}
