//! The shader cache: programs read back as they were compiled, damaged entries (truncated at
//! every length, bits flipped) are removed and recompiled, never returned; another build's or
//! format's entries are not read; least recently used entries go first past the size limit;
//! concurrent writers (threads and processes) leave only sound entries; a directory that cannot
//! be written only costs a warning.

use kiln::cache::{BuildId, Cache, Key};
use kiln::pipeline::{self, EntryPoint, Options, Program};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const SHADER: &str = "examples/rings.frag";

fn source() -> kiln_front::Source {
    pipeline::read(Path::new(SHADER)).expect("the example reads")
}

fn compile(cache: &Cache) -> (Program, bool) {
    pipeline::compile_program(
        &source(),
        &EntryPoint::default(),
        &Options::default(),
        cache,
    )
    .expect("the example compiles")
}

fn entry_file(cache: &Cache) -> PathBuf {
    let key = pipeline::program_key(
        cache,
        &source(),
        &EntryPoint::default(),
        &Options::default(),
    );
    cache.entry_path(&key).expect("a directory")
}

#[test]
fn a_program_reads_back_as_it_was_compiled() {
    let dir = scratch("round-trip");
    let fresh = {
        let shader = pipeline::read_shader(Path::new(SHADER)).expect("parses");
        let c = pipeline::compile(&shader, &EntryPoint::default(), &Options::default())
            .expect("compiles");
        Program::of(&c)
    };
    let (first, hit) = compile(&Cache::open(dir.clone()));
    assert!(!hit);
    assert_eq!(first, fresh);
    // A new cache on the same directory: from disk, not memory.
    let cache = Cache::open(dir.clone());
    let (second, hit) = compile(&cache);
    assert!(hit);
    assert_eq!(second, fresh);
    assert_eq!(cache.counts().disk_hits, 1);
    // Other options are another key.
    let ssa = Options {
        allocator: kiln_regalloc::Allocator::Ssa,
        ..Options::default()
    };
    let (_, hit) =
        pipeline::compile_program(&source(), &EntryPoint::default(), &ssa, &cache).unwrap();
    assert!(
        !hit,
        "another allocator must not read the graph allocator's program"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every truncation of a stored entry, and flipped bits all over it: the read misses, the file
/// is removed, the compile runs again and stores a sound entry.
#[test]
fn damaged_entries_are_removed_and_recompiled() {
    let dir = scratch("damage");
    let (fresh, _) = compile(&Cache::open(dir.clone()));
    let path = entry_file(&Cache::open(dir.clone()));
    let sound = std::fs::read(&path).expect("the entry was written");
    let mut damaged: Vec<Vec<u8>> = (0..sound.len()).map(|n| sound[..n].to_vec()).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bit = (x % (sound.len() as u64 * 8)) as usize;
        let mut flipped = sound.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        damaged.push(flipped);
    }
    for (i, bytes) in damaged.iter().enumerate() {
        std::fs::write(&path, bytes).unwrap();
        let cache = Cache::open(dir.clone());
        assert!(
            cache.get(&key_of(&cache)).is_none(),
            "damaged entry {i} was returned"
        );
        assert!(!path.exists(), "damaged entry {i} was not removed");
        assert_eq!(cache.counts().damaged, 1);
    }
    // The last damage: the compile goes on as a miss and stores the program again.
    std::fs::write(&path, &damaged[5]).unwrap();
    let (again, hit) = compile(&Cache::open(dir.clone()));
    assert!(!hit);
    assert_eq!(again, fresh);
    assert_eq!(std::fs::read(&path).unwrap(), sound);
    let _ = std::fs::remove_dir_all(&dir);
}

fn key_of(cache: &Cache) -> Key {
    pipeline::program_key(
        cache,
        &source(),
        &EntryPoint::default(),
        &Options::default(),
    )
}

#[test]
fn another_build_or_format_is_not_read() {
    let dir = scratch("version");
    let ours = Cache::with_build(Some(dir.clone()), BuildId([1; 32]));
    ours.put(&ours.key("x").finish(), b"payload");
    let theirs = Cache::with_build(Some(dir.clone()), BuildId([2; 32]));
    assert!(theirs.get(&theirs.key("x").finish()).is_none());
    // The same key read by another build (an entry copied between builds' directories).
    let key = ours.key("x").finish();
    assert!(theirs.get(&key).is_none());
    assert_eq!(
        theirs.counts().damaged,
        1,
        "another build's entry under our key is damage"
    );
    // A format version from the future.
    ours.put(&key, b"payload");
    let path = ours.entry_path(&key).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = 2;
    std::fs::write(&path, &bytes).unwrap();
    assert!(
        Cache::with_build(Some(dir.clone()), BuildId([1; 32]))
            .get(&key)
            .is_none()
    );
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn least_recently_used_entries_go_first() {
    let dir = scratch("evict");
    let build = BuildId([3; 32]);
    let cache = Cache::with_build(Some(dir.clone()), build).limit(40_000);
    let keys: Vec<Key> = (0..30u32)
        .map(|i| cache.key("x").field(&i.to_le_bytes()).finish())
        .collect();
    let payload = vec![7u8; 2_000];
    let base = SystemTime::now() - Duration::from_secs(10_000);
    for (i, k) in keys.iter().enumerate() {
        cache.put(k, &payload);
        // Entry i was used at base + i seconds, except entry 0, used last.
        let used = if i == 0 {
            base + Duration::from_secs(5_000)
        } else {
            base + Duration::from_secs(i as u64)
        };
        std::fs::File::open(cache.entry_path(k).unwrap())
            .unwrap()
            .set_modified(used)
            .unwrap();
    }
    cache.evict();
    let total: u64 = cache.files().iter().map(|f| f.size).sum();
    assert!(total <= 40_000, "{total} bytes past the limit");
    let kept: Vec<bool> = keys
        .iter()
        .map(|k| cache.entry_path(k).unwrap().exists())
        .collect();
    assert!(kept[0], "the most recently used entry was evicted");
    assert!(!kept[1], "the least recently used entry was kept");
    let first_kept = kept[1..].iter().position(|&k| k).expect("some are kept") + 1;
    assert!(
        kept[first_kept..].iter().all(|&k| k),
        "eviction is not oldest first: {kept:?}"
    );
    // A read makes an entry the newest.
    let old = keys[first_kept];
    assert!(
        Cache::with_build(Some(dir.clone()), build)
            .get(&old)
            .is_some()
    );
    let newest = cache.files().last().unwrap().path.clone();
    assert_eq!(newest, cache.entry_path(&old).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_threads_leave_sound_entries() {
    let dir = scratch("threads");
    let build = BuildId([4; 32]);
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let dir = dir.clone();
            s.spawn(move || {
                let cache = Cache::with_build(Some(dir), build);
                for i in 0..50u32 {
                    let k = cache.key("x").field(&(i % 5).to_le_bytes()).finish();
                    let payload = vec![(i % 5) as u8; 3_000 + (i % 5) as usize];
                    cache.put(&k, &payload);
                    if let Some(p) = cache.get(&k) {
                        assert_eq!(&*p, &payload[..], "thread {t} read another payload");
                    }
                }
                assert_eq!(cache.counts().damaged, 0);
            });
        }
    });
    let v = Cache::with_build(Some(dir.clone()), build).verify(true);
    assert_eq!((v.current, v.damaged.len()), (5, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

fn kiln(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .expect("kiln runs")
}

#[test]
fn concurrent_processes_share_a_cache() {
    let dir = scratch("processes");
    let d = dir.to_str().unwrap();
    let reference = kiln(&["compile", SHADER, "--stats", "--no-cache"]);
    assert!(reference.status.success());
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_kiln"))
                .args(["compile", SHADER, "--stats", "--cache", d])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, reference.stdout);
    }
    let verify = kiln(&["cache", "verify", "--cache", d]);
    let text = String::from_utf8_lossy(&verify.stdout);
    assert!(
        text.contains(": 1 sound entries of this build, 0 of other builds, 0 damaged"),
        "{text}"
    );
    // A damaged entry: verify removes it, and stats then count none.
    let entry = Cache::open(dir.clone()).files()[0].path.clone();
    std::fs::write(&entry, b"KILNCACH").unwrap();
    let stats = kiln(&["cache", "stats", "--cache", d]);
    assert!(String::from_utf8_lossy(&stats.stdout).contains("0 of other builds, 1 damaged"));
    let verify = kiln(&["cache", "verify", "--cache", d]);
    assert!(String::from_utf8_lossy(&verify.stdout).contains("1 damaged (removed)"));
    assert!(!entry.exists());
    let clear = kiln(&["cache", "clear", "--cache", d]);
    assert!(String::from_utf8_lossy(&clear.stdout).starts_with("removed 0 files"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_cache_only_warns() {
    let dir = scratch("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let under_file = file.join("cache");
    let out = kiln(&[
        "compile",
        SHADER,
        "--stats",
        "--cache",
        under_file.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(" inst, "));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: shader cache") && err.contains("cannot write"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A corpus compiled twice through one cache: the second run reads every program back, its
/// report equals the first's but for times, and `kiln report` finds nothing changed.
#[test]
fn a_corpus_run_twice_and_its_report() {
    let dir = scratch("corpus");
    let shaders = dir.join("shaders");
    std::fs::create_dir_all(&shaders).unwrap();
    for f in ["rings.frag", "wipe.frag"] {
        std::fs::copy(Path::new("examples").join(f), shaders.join(f)).unwrap();
    }
    std::fs::write(shaders.join("broken.frag"), "void main( {").unwrap();
    let cache = dir.join("cache");
    let run = |json: &Path| {
        let out = kiln(&[
            "corpus",
            "compile",
            shaders.to_str().unwrap(),
            "-j",
            "1",
            "--cache",
            cache.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (cold, warm) = (dir.join("cold.json"), dir.join("warm.json"));
    let first = run(&cold);
    assert!(first.contains("0 hits"), "{first}");
    let second = run(&warm);
    assert!(second.contains("cache            4 hits"), "{second}");
    let entries = |p: &Path| -> Vec<serde_json::Value> {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        doc["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut e = e.clone();
                let m = e.as_object_mut().unwrap();
                m.remove("compile_time_us");
                m.remove("cached");
                e
            })
            .collect()
    };
    let (a, b) = (entries(&cold), entries(&warm));
    assert_eq!(a, b);
    let statuses: Vec<&str> = a.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["not lowered", "compiled", "compiled"]);
    let report = kiln(&["report", cold.to_str().unwrap(), warm.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("3 entry points before, 3 after, 3 in both, 2 compiled in both"));
    assert!(text.contains("helped: 0\nHURT: 0"), "{text}");
    assert!(!text.contains("status changes"), "{text}");
    // Bad input: a malformed report, a report onto an input.
    std::fs::write(dir.join("bad.json"), "{\"format\": [").unwrap();
    let bad = kiln(&[
        "report",
        dir.join("bad.json").to_str().unwrap(),
        cold.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("bad.json") && err.contains("line 1"), "{err}");
    let onto_input = kiln(&[
        "corpus",
        "compile",
        shaders.to_str().unwrap(),
        "--no-cache",
        "--json",
        shaders.join("rings.frag").to_str().unwrap(),
    ]);
    assert!(!onto_input.status.success());
    assert!(String::from_utf8_lossy(&onto_input.stderr).contains("refusing"));
    assert_eq!(
        std::fs::read(shaders.join("rings.frag")).unwrap(),
        std::fs::read("examples/rings.frag").unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
