//! The slow FUSE fixture itself behaves as the trap needs: serialized, slow, uncached.

use std::time::{Duration, Instant};

use trapdetect_e2e::{require_root, slowfs::SlowFs};

#[test]
fn slowfs_is_slow_uncached_and_unmounts() {
    if !require_root("slowfs_is_slow_uncached_and_unmounts") {
        return;
    }
    let mnt;
    {
        let fs = SlowFs::mount(2000, |b| std::fs::write(b.join("f"), b"hello").unwrap());
        mnt = fs.mount.clone();
        let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 3);
        assert_eq!(std::fs::read(fs.mount.join("f")).unwrap(), b"hello");
        // TTL 0: every stat of d1/d2/d3 looks up each component again.
        let before = fs.stats()["lookup"].as_u64().unwrap();
        let start = Instant::now();
        for _ in 0..5 {
            std::fs::symlink_metadata(&deep).unwrap();
        }
        let took = start.elapsed();
        let lookups = fs.stats()["lookup"].as_u64().unwrap() - before;
        assert_eq!(lookups, 15, "3 components × 5 stats, nothing cached");
        // 15 lookups × 2 ms sleep each, at least.
        assert!(took >= Duration::from_millis(30), "{took:?}");
    }
    assert!(
        !trapdetect_e2e::slowfs::is_mounted(&mnt),
        "unmounted on drop"
    );
}
