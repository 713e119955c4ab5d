//! The shader cache: compiled programs kept on disk and in memory, keyed by everything that
//! changes them, after Mesa's `util/disk_cache.c` and `disk_cache_os.c`: the key hashes the
//! compiler's build, the shader and the state its code depends on; an entry is written whole
//! to a temporary file and renamed into place, so a reader sees all of it or nothing; a header
//! and a checksum are verified on every read; the cache has a size limit and evicts the least
//! recently used entries first (reads touch an entry's modification time, as Mesa's do).
//!
//! A cache that cannot be written (a read-only or full disk, a path that is not a directory)
//! never fails a compile: the first problem becomes a warning ([`Cache::warning`]) and the
//! cache stops writing.

use std::collections::HashMap;
use std::fs;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// A cache key: a blake3 hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key(pub [u8; 32]);

impl Key {
    /// Starts a key of `kind` (what the entry holds) for the build `build`.
    pub fn builder(kind: &str, build: &BuildId) -> KeyBuilder {
        KeyBuilder(blake3::Hasher::new())
            .field(FORMAT_NAME)
            .field(&build.0)
            .field(kind.as_bytes())
    }

    /// Lower-case hexadecimal.
    pub fn hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }
}

/// A key, field by field; each field is length-prefixed, so two fields never read as one.
pub struct KeyBuilder(blake3::Hasher);

impl KeyBuilder {
    pub fn field(mut self, bytes: &[u8]) -> KeyBuilder {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub fn finish(self) -> Key {
        Key(*self.0.finalize().as_bytes())
    }
}

/// What identifies one build of the compiler: its version and a hash of its executable's
/// path, size and modification time — every build writes a new executable, so a rebuilt
/// compiler never reads an older one's entries (Mesa's `disk_cache_get_function_timestamp`,
/// its fallback when a driver has no build-id note).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildId(pub [u8; 32]);

impl BuildId {
    /// The running compiler's (computed once).
    pub fn current() -> BuildId {
        static ID: OnceLock<BuildId> = OnceLock::new();
        *ID.get_or_init(|| {
            let mut h = blake3::Hasher::new();
            h.update(env!("CARGO_PKG_VERSION").as_bytes());
            if let Ok(exe) = std::env::current_exe() {
                h.update(exe.as_os_str().as_encoded_bytes());
                if let Ok(meta) = fs::metadata(&exe) {
                    h.update(&meta.len().to_le_bytes());
                    let modified = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                        .unwrap_or_default();
                    h.update(&modified.as_nanos().to_le_bytes());
                }
            }
            BuildId(*h.finalize().as_bytes())
        })
    }
}

/// The entries' format: its name and version open every key and every entry.
const FORMAT_NAME: &[u8] = b"kiln shader cache";
const MAGIC: &[u8; 8] = b"KILNCACH";
const VERSION: u32 = 1;
/// Header: magic, version, reserved (0), key, build, payload length, payload checksum.
const HEADER: usize = 8 + 4 + 4 + 32 + 32 + 8 + 32;

/// Mesa's default size limit (`MESA_SHADER_CACHE_MAX_SIZE`): 1 GiB.
pub const DEFAULT_LIMIT: u64 = 1 << 30;
/// The in-memory layer's size limit.
const MEMORY_LIMIT: u64 = 256 << 20;

/// An entry as it is stored: header, then payload.
pub fn encode(key: &Key, build: &BuildId, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&build.0);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(payload).as_bytes());
    out.extend_from_slice(payload);
    out
}

/// What is wrong with a stored entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Damage {
    Truncated,
    BadMagic,
    Version(u32),
    Reserved,
    /// The entry is stored under another key's name.
    WrongKey,
    /// Written by another build of the compiler.
    OtherBuild,
    /// The payload is longer than the header says.
    Trailing,
    Checksum,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Truncated => write!(f, "truncated"),
            Damage::BadMagic => write!(f, "not a kiln cache entry"),
            Damage::Version(v) => write!(f, "format version {v}, not {VERSION}"),
            Damage::Reserved => write!(f, "reserved header bits set"),
            Damage::WrongKey => write!(f, "stored under another key"),
            Damage::OtherBuild => write!(f, "written by another build"),
            Damage::Trailing => write!(f, "bytes after the payload"),
            Damage::Checksum => write!(f, "checksum mismatch"),
        }
    }
}

/// The header fields of an entry whose header is sound: its key and build.
fn header(bytes: &[u8]) -> Result<(Key, BuildId, usize), Damage> {
    if bytes.len() < HEADER {
        return Err(if MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
            Damage::Truncated
        } else {
            Damage::BadMagic
        });
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let array = |at: usize| -> [u8; 32] { bytes[at..at + 32].try_into().expect("32 bytes") };
    if &bytes[..8] != MAGIC {
        return Err(Damage::BadMagic);
    }
    if word(8) != VERSION {
        return Err(Damage::Version(word(8)));
    }
    if word(12) != 0 {
        return Err(Damage::Reserved);
    }
    let len = u64::from_le_bytes(bytes[80..88].try_into().expect("8 bytes"));
    Ok((Key(array(16)), BuildId(array(48)), len as usize))
}

/// The payload of a stored entry, checked against the key and build it must have.
pub fn decode<'a>(bytes: &'a [u8], key: &Key, build: &BuildId) -> Result<&'a [u8], Damage> {
    let (stored_key, stored_build, len) = header(bytes)?;
    let payload = &bytes[HEADER..];
    match payload.len().cmp(&len) {
        std::cmp::Ordering::Less => return Err(Damage::Truncated),
        std::cmp::Ordering::Greater => return Err(Damage::Trailing),
        std::cmp::Ordering::Equal => {}
    }
    if blake3::hash(payload).as_bytes() != &bytes[88..120] {
        return Err(Damage::Checksum);
    }
    if stored_key != *key {
        return Err(Damage::WrongKey);
    }
    if stored_build != *build {
        return Err(Damage::OtherBuild);
    }
    Ok(payload)
}

/// How a cache was used: reads that found an entry (in memory, on disk), reads that did not,
/// entries written, damaged entries found and removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub misses: u64,
    pub writes: u64,
    pub damaged: u64,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    damaged: AtomicU64,
}

#[derive(Default)]
struct Memory {
    entries: HashMap<Key, Arc<[u8]>>,
    bytes: u64,
}

/// A shader cache: a directory (or none), an in-memory layer, and the build whose entries it
/// reads.
pub struct Cache {
    dir: Option<PathBuf>,
    build: BuildId,
    limit: u64,
    enabled: bool,
    memory: Mutex<Memory>,
    counters: Counters,
    /// Bytes written since the directory was last measured for eviction.
    since_scan: AtomicU64,
    scanned: AtomicBool,
    evicting: Mutex<()>,
    /// The first problem with the directory; writing stops once there is one.
    warning: OnceLock<String>,
}

/// One file of a cache directory.
#[derive(Clone, Debug)]
pub struct StoredFile {
    pub path: PathBuf,
    pub size: u64,
    pub used: SystemTime,
}

impl Cache {
    /// A cache in `dir` (created on the first write) for the running build.
    pub fn open(dir: PathBuf) -> Cache {
        Cache::with_build(Some(dir), BuildId::current())
    }

    /// A cache in memory only.
    pub fn in_memory() -> Cache {
        Cache::with_build(None, BuildId::current())
    }

    /// No cache: every read misses, nothing is kept.
    pub fn disabled() -> Cache {
        Cache {
            enabled: false,
            ..Cache::in_memory()
        }
    }

    /// A cache for another build's entries (tests of a version change).
    pub fn with_build(dir: Option<PathBuf>, build: BuildId) -> Cache {
        Cache {
            dir,
            build,
            limit: DEFAULT_LIMIT,
            enabled: true,
            memory: Mutex::default(),
            counters: Counters::default(),
            since_scan: AtomicU64::new(0),
            scanned: AtomicBool::new(false),
            evicting: Mutex::new(()),
            warning: OnceLock::new(),
        }
    }

    /// Starts the key of an entry of `kind` for this cache's build.
    pub fn key(&self, kind: &str) -> KeyBuilder {
        Key::builder(kind, &self.build)
    }

    /// The same cache with a size limit in bytes.
    pub fn limit(mut self, bytes: u64) -> Cache {
        self.limit = bytes;
        self
    }

    /// The cache directory: `KILN_CACHE_DIR`, else the platform's cache directory's `kiln`.
    pub fn default_dir() -> Option<PathBuf> {
        match std::env::var_os("KILN_CACHE_DIR") {
            Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
            _ => dirs::cache_dir().map(|d| d.join("kiln")),
        }
    }

    /// The size limit `KILN_CACHE_MAX_SIZE` asks for (bytes, or with a `K`, `M` or `G`
    /// suffix, as Mesa's `MESA_SHADER_CACHE_MAX_SIZE`), else [`DEFAULT_LIMIT`].
    pub fn limit_from_env() -> Result<u64, String> {
        match std::env::var("KILN_CACHE_MAX_SIZE") {
            Ok(s) if !s.is_empty() => parse_size(&s),
            _ => Ok(DEFAULT_LIMIT),
        }
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        Counts {
            memory_hits: c.memory_hits.load(Relaxed),
            disk_hits: c.disk_hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            writes: c.writes.load(Relaxed),
            damaged: c.damaged.load(Relaxed),
        }
    }

    /// The first problem the cache had with its directory, if any.
    pub fn warning(&self) -> Option<&str> {
        self.warning.get().map(String::as_str)
    }

    fn warn(&self, message: String) {
        let _ = self.warning.set(message);
    }

    /// Where the entry of `key` is stored: `DIR/ab/cdef…` by its hexadecimal name.
    pub fn entry_path(&self, key: &Key) -> Option<PathBuf> {
        let hex = key.hex();
        self.dir.as_ref().map(|d| d.join(&hex[..2]).join(&hex[2..]))
    }

    /// The payload stored under `key`, from memory or disk. A damaged entry on disk is
    /// removed and reads as missing.
    pub fn get(&self, key: &Key) -> Option<Arc<[u8]>> {
        if !self.enabled {
            return None;
        }
        if let Some(p) = self.memory.lock().expect("cache memory").entries.get(key) {
            self.counters.memory_hits.fetch_add(1, Relaxed);
            return Some(p.clone());
        }
        let found = self
            .entry_path(key)
            .and_then(|path| self.read_disk(&path, key));
        match &found {
            Some(payload) => {
                self.counters.disk_hits.fetch_add(1, Relaxed);
                self.remember(key, payload.clone());
            }
            None => {
                self.counters.misses.fetch_add(1, Relaxed);
            }
        }
        found
    }

    fn read_disk(&self, path: &Path, key: &Key) -> Option<Arc<[u8]>> {
        let mut file = fs::File::open(path).ok()?;
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_err() {
            return None;
        }
        match decode(&bytes, key, &self.build) {
            Ok(payload) => {
                // Least recently used: a read makes the entry new again.
                let _ = file.set_modified(SystemTime::now());
                Some(Arc::from(payload))
            }
            Err(_) => {
                self.counters.damaged.fetch_add(1, Relaxed);
                let _ = fs::remove_file(path);
                None
            }
        }
    }

    fn remember(&self, key: &Key, payload: Arc<[u8]>) {
        let mut memory = self.memory.lock().expect("cache memory");
        let size = payload.len() as u64;
        if memory.bytes + size <= MEMORY_LIMIT && memory.entries.insert(*key, payload).is_none() {
            memory.bytes += size;
        }
    }

    /// Stores `payload` under `key`, in memory and (unless the directory failed before) on
    /// disk. Never fails: a problem with the directory becomes the cache's warning.
    pub fn put(&self, key: &Key, payload: &[u8]) {
        if !self.enabled {
            return;
        }
        self.remember(key, Arc::from(payload));
        let Some(path) = self.entry_path(key) else {
            return;
        };
        if self.warning.get().is_some() {
            return;
        }
        let bytes = encode(key, &self.build, payload);
        match write_atomically(&path, &bytes) {
            Ok(()) => {
                self.counters.writes.fetch_add(1, Relaxed);
                let since = self.since_scan.fetch_add(bytes.len() as u64, Relaxed);
                // The directory is measured on the first write of a process and then after
                // every sixteenth of the limit written: a walk of the directory amortized over
                // the entries written since.
                if !self.scanned.swap(true, Relaxed) || since > self.limit / 16 {
                    self.since_scan.store(0, Relaxed);
                    self.evict();
                }
            }
            Err(e) => self.warn(format!(
                "shader cache {}: cannot write ({e}); compiling without storing",
                self.dir.as_deref().unwrap_or(Path::new("")).display()
            )),
        }
    }

    /// The typed payload under `key` (JSON); one that does not parse is removed as damaged.
    pub fn get_json<T: serde::de::DeserializeOwned>(&self, key: &Key) -> Option<T> {
        let payload = self.get(key)?;
        match serde_json::from_slice(&payload) {
            Ok(v) => Some(v),
            Err(_) => {
                self.counters.damaged.fetch_add(1, Relaxed);
                self.memory
                    .lock()
                    .expect("cache memory")
                    .entries
                    .remove(key);
                if let Some(path) = self.entry_path(key) {
                    let _ = fs::remove_file(path);
                }
                None
            }
        }
    }

    pub fn put_json<T: serde::Serialize>(&self, key: &Key, value: &T) {
        if self.enabled {
            let payload = serde_json::to_vec(value).expect("cache payloads serialize");
            self.put(key, &payload);
        }
    }

    /// Every file of the directory (entries, and temporary files left by a writer that
    /// stopped), oldest use first.
    pub fn files(&self) -> Vec<StoredFile> {
        let mut out = Vec::new();
        let Some(dir) = &self.dir else {
            return out;
        };
        let Ok(subdirs) = fs::read_dir(dir) else {
            return out;
        };
        for sub in subdirs.flatten() {
            let name = sub.file_name();
            let name = name.to_string_lossy();
            if name.len() != 2 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            let Ok(entries) = fs::read_dir(sub.path()) else {
                continue;
            };
            for e in entries.flatten() {
                if let Ok(meta) = e.metadata()
                    && meta.is_file()
                {
                    out.push(StoredFile {
                        path: e.path(),
                        size: meta.len(),
                        used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.used.cmp(&b.used).then_with(|| a.path.cmp(&b.path)));
        out
    }

    /// Removes the least recently used files until the directory holds at most nine tenths
    /// of the limit, when it holds more than the limit; temporary files more than an hour
    /// old go first. Another process evicting at the same time only makes removals fail.
    pub fn evict(&self) {
        let Ok(_one) = self.evicting.try_lock() else {
            return;
        };
        let files = self.files();
        let mut total: u64 = files.iter().map(|f| f.size).sum();
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        for f in &files {
            if is_temporary(&f.path) && f.used < hour_ago && fs::remove_file(&f.path).is_ok() {
                total -= f.size;
            }
        }
        if total <= self.limit {
            return;
        }
        let target = self.limit / 10 * 9;
        for f in files.iter().filter(|f| !is_temporary(&f.path)) {
            if total <= target {
                break;
            }
            if fs::remove_file(&f.path).is_ok() {
                total -= f.size;
            }
        }
    }

    /// Removes every file of the directory: (files, bytes) removed.
    pub fn clear(&self) -> (u64, u64) {
        self.memory.lock().expect("cache memory").entries.clear();
        let mut removed = (0, 0);
        for f in self.files() {
            if fs::remove_file(&f.path).is_ok() {
                removed.0 += 1;
                removed.1 += f.size;
            }
        }
        removed
    }

    /// Reads every entry: the sound ones of this build, of other builds, and the damaged ones
    /// (their paths and what was wrong), which `remove` removes.
    pub fn verify(&self, remove: bool) -> Verified {
        let mut v = Verified::default();
        for f in self.files() {
            if is_temporary(&f.path) {
                continue;
            }
            let checked = fs::read(&f.path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    let (key, build, _) = header(&bytes).map_err(|d| d.to_string())?;
                    let named = f.path.parent().and_then(Path::file_name).map(|d| {
                        format!(
                            "{}{}",
                            d.to_string_lossy(),
                            f.path.file_name().unwrap_or_default().to_string_lossy()
                        )
                    });
                    if named.as_deref() != Some(key.hex().as_str()) {
                        return Err(Damage::WrongKey.to_string());
                    }
                    decode(&bytes, &key, &build).map_err(|d| d.to_string())?;
                    Ok(build == self.build)
                });
            match checked {
                Ok(true) => v.current += 1,
                Ok(false) => v.other_builds += 1,
                Err(why) => {
                    if remove {
                        let _ = fs::remove_file(&f.path);
                    }
                    v.damaged.push((f.path, why));
                }
            }
        }
        v
    }
}

/// What [`Cache::verify`] found.
#[derive(Debug, Default)]
pub struct Verified {
    pub current: u64,
    pub other_builds: u64,
    pub damaged: Vec<(PathBuf, String)>,
}

fn is_temporary(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(".tmp"))
}

/// Writes `bytes` to a temporary file beside `path` and renames it there: a reader sees the
/// old file, no file, or the whole new one, and two writers of the same entry both succeed.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("entries live in a subdirectory");
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp.{}.{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Relaxed)
    ));
    let written = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// A size: bytes, or with a `K`, `M` or `G` suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1u64 << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{s}` is not a size (bytes, or a number with K, M or G)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Key {
        Key::builder("test", &BuildId([7; 32])).field(&[n]).finish()
    }

    #[test]
    fn round_trip_and_every_damage() {
        let build = BuildId([7; 32]);
        let k = key(1);
        let entry = encode(&k, &build, b"payload");
        assert_eq!(decode(&entry, &k, &build), Ok(&b"payload"[..]));
        assert_eq!(decode(&entry, &key(2), &build), Err(Damage::WrongKey));
        assert_eq!(
            decode(&entry, &k, &BuildId([8; 32])),
            Err(Damage::OtherBuild)
        );
        for len in 0..entry.len() {
            assert!(decode(&entry[..len], &k, &build).is_err(), "length {len}");
        }
        for bit in 0..entry.len() * 8 {
            let mut flipped = entry.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&flipped, &k, &build).is_err(), "bit {bit}");
        }
        let mut longer = entry.clone();
        longer.push(0);
        assert_eq!(decode(&longer, &k, &build), Err(Damage::Trailing));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("500m"), Ok(500 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
