//! Test helper shared by the `.npy` tests: a file written byte by byte.

/// A version-1 `.npy` file: magic, version, header length, the header
/// dict padded to a multiple of 64 bytes, then `data`.
pub fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(text.len()).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}
