//! Struct member offsets from the kernel's BTF (/sys/kernel/btf/vmlinux).
//!
//! aya's Rust eBPF side has no CO-RE relocations and `aya::Btf` does not expose member offsets,
//! so the loader reads them here and hands them to the programs as `.rodata` globals. Only the
//! parts of the format needed for that are decoded; everything is bounds-checked, so a
//! malformed blob is an error, never a panic.

use std::collections::HashMap;

/// Why BTF could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The blob is not BTF we understand.
    #[error("malformed BTF: {0}")]
    Malformed(&'static str),
    /// A struct is missing.
    #[error("struct {0} not in kernel BTF")]
    NoStruct(String),
    /// A member is missing.
    #[error("{0}.{1} not in kernel BTF")]
    NoMember(String, String),
}

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

struct Member {
    name_off: u32,
    type_id: u32,
    bit_offset: u32,
}

struct Type {
    name_off: u32,
    kind: u32,
    /// size for structs, referenced type for modifiers.
    size_or_type: u32,
    members: Vec<Member>,
}

/// Parsed kernel BTF: just structs, unions and the modifiers between them.
pub struct Btf {
    strings: Vec<u8>,
    types: Vec<Type>,
    structs: HashMap<String, usize>,
}

impl Btf {
    /// Parses a BTF blob (little-endian).
    pub fn parse(data: &[u8]) -> Result<Self, BtfError> {
        let u32_at = |o: usize| -> Result<u32, BtfError> {
            data.get(o..o + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or(BtfError::Malformed("truncated"))
        };
        if data.len() < 24 || data[0..2] != [0x9f, 0xeb] {
            return Err(BtfError::Malformed("bad magic (not little-endian BTF)"));
        }
        let hdr_len = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or(BtfError::Malformed("string section out of bounds"))?
            .to_vec();
        let mut types = vec![Type {
            name_off: 0,
            kind: 0,
            size_or_type: 0,
            members: vec![],
        }];
        let mut p = hdr_len + type_off;
        let end = p + type_len;
        if end > data.len() {
            return Err(BtfError::Malformed("type section out of bounds"));
        }
        while p < end {
            let name_off = u32_at(p)?;
            let info = u32_at(p + 4)?;
            let size_or_type = u32_at(p + 8)?;
            p += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let mut members = vec![];
            match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => p += 4,
                KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
                | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => {}
                KIND_ARRAY => p += 12,
                KIND_STRUCT | KIND_UNION => {
                    for _ in 0..vlen {
                        let off = u32_at(p + 8)?;
                        members.push(Member {
                            name_off: u32_at(p)?,
                            type_id: u32_at(p + 4)?,
                            // With kind_flag, the low 24 bits are the bit offset.
                            bit_offset: if kind_flag { off & 0xff_ffff } else { off },
                        });
                        p += 12;
                    }
                }
                KIND_ENUM | KIND_FUNC_PROTO => p += 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => p += 12 * vlen,
                _ => return Err(BtfError::Malformed("unknown type kind")),
            }
            types.push(Type {
                name_off,
                kind,
                size_or_type,
                members,
            });
        }
        let mut btf = Btf {
            strings,
            types,
            structs: HashMap::new(),
        };
        for (i, t) in btf.types.iter().enumerate() {
            if t.kind == KIND_STRUCT && !t.members.is_empty() {
                btf.structs
                    .entry(btf.name(t.name_off).to_string())
                    .or_insert(i);
            }
        }
        Ok(btf)
    }

    fn name(&self, off: u32) -> &str {
        let s = self.strings.get(off as usize..).unwrap_or_default();
        let n = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..n]).unwrap_or("")
    }

    /// Follows typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(id as usize) {
                Some(t)
                    if matches!(
                        t.kind,
                        KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG
                    ) =>
                {
                    id = t.size_or_type
                }
                _ => break,
            }
        }
        id
    }

    fn find(&self, id: usize, field: &str, depth: u32) -> Option<u32> {
        if depth > 8 {
            return None;
        }
        let t = self.types.get(id)?;
        for m in &t.members {
            if m.name_off != 0 && self.name(m.name_off) == field {
                return Some(m.bit_offset);
            }
            if m.name_off == 0 {
                let inner = self.resolve(m.type_id) as usize;
                if matches!(
                    self.types.get(inner).map(|t| t.kind),
                    Some(KIND_STRUCT | KIND_UNION)
                ) && let Some(o) = self.find(inner, field, depth + 1)
                {
                    // Checked: offsets past u32 are a malformed blob (the btf fuzzer's find).
                    return m.bit_offset.checked_add(o);
                }
            }
        }
        None
    }

    /// Byte offset of `field` in `struct name` (anonymous structs and unions searched);
    /// `field` may be a dotted path through embedded structs (`pwd.dentry`).
    pub fn offset(&self, name: &str, field: &str) -> Result<u32, BtfError> {
        let mut id = *self
            .structs
            .get(name)
            .ok_or_else(|| BtfError::NoStruct(name.into()))?;
        let mut total = 0u32;
        let parts: Vec<&str> = field.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let bits = self
                .find(id, part, 0)
                .ok_or_else(|| BtfError::NoMember(name.into(), field.into()))?;
            if bits % 8 != 0 {
                return Err(BtfError::NoMember(
                    name.into(),
                    format!("{field} (a bitfield)"),
                ));
            }
            total += bits / 8;
            if i + 1 < parts.len() {
                // Descend into the member's (embedded) struct type.
                let member_type = self
                    .member_type(id, part, 0)
                    .ok_or_else(|| BtfError::NoMember(name.into(), field.into()))?;
                id = self.resolve(member_type) as usize;
            }
        }
        Ok(total)
    }

    fn member_type(&self, id: usize, field: &str, depth: u32) -> Option<u32> {
        if depth > 8 {
            return None;
        }
        for m in &self.types.get(id)?.members {
            if m.name_off != 0 && self.name(m.name_off) == field {
                return Some(m.type_id);
            }
            if m.name_off == 0 {
                let inner = self.resolve(m.type_id) as usize;
                if let Some(t) = self.member_type(inner, field, depth + 1) {
                    return Some(t);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(b"").is_err());
        assert!(
            Btf::parse(&[
                0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0,
                0
            ])
            .is_err()
        );
        let mut blob = vec![0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
        blob.extend_from_slice(&[0; 16]);
        let btf = Btf::parse(&blob).unwrap();
        assert!(matches!(
            btf.offset("task_struct", "pid"),
            Err(BtfError::NoStruct(_))
        ));
    }

    #[test]
    fn vmlinux_offsets_are_consistent() {
        let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("SKIP: no /sys/kernel/btf/vmlinux");
            return;
        };
        let btf = Btf::parse(&data).unwrap();
        let pid = btf.offset("task_struct", "pid").unwrap();
        assert_eq!(btf.offset("task_struct", "tgid").unwrap(), pid + 4);
        // struct path { struct vfsmount *mnt; struct dentry *dentry; }
        assert_eq!(btf.offset("path", "dentry").unwrap(), 8);
        let pwd = btf.offset("fs_struct", "pwd").unwrap();
        assert_eq!(btf.offset("fs_struct", "pwd.dentry").unwrap(), pwd + 8);
        // skc_num sits in an anonymous union of sock_common.
        assert_eq!(btf.offset("sock_common", "skc_num").unwrap(), 14);
        assert!(btf.offset("task_struct", "no_such_field").is_err());
    }
}
