//! The C API from C: builds `tests/c/api_test.c` and the examples under
//! `examples/c` with the system C compiler against the libraries cargo built
//! for this test run (target/<profile>/libpagealloc_c.{a,so}: `cargo test`
//! builds every crate type of the library before the tests), then runs them.
//!
//! Also compiles the header as C++ (its `extern "C"` guards) when a C++
//! compiler is there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The static library's native dependencies (`--print native-static-libs`).
const NATIVE_LIBS: &[&str] = &["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

/// Where cargo put libpagealloc_c.{a,so} for this run. `cargo test` builds
/// every crate type of the library with the rlib this test links and leaves
/// them in target/<profile> or, when the library was built only as a
/// dependency (as for examples), in target/<profile>/deps: the newer of the two.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    let modified = |d: &Path| -> Option<std::time::SystemTime> {
        d.join("libpagealloc_c.so").metadata().ok()?;
        d.join("libpagealloc_c.a").metadata().ok()?.modified().ok()
    };
    [deps, deps.parent().expect("profile dir")]
        .into_iter()
        .filter_map(|d| Some((modified(d)?, d.to_path_buf())))
        .max()
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("libpagealloc_c.a/.so not found in {} or its parent", deps.display()))
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pagealloc-capi");
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn check(what: &str, o: Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what} failed ({}):\n{out}\n{err}", o.status);
    out
}

enum Link {
    Static,
    Shared,
}

/// Compile one C file against the header and the library.
fn build(src: &Path, name: &str, link: Link) -> PathBuf {
    build_opt(src, name, link, "-O1")
}

/// [`build`] at optimisation level `opt`.
fn build_opt(src: &Path, name: &str, link: Link, opt: &str) -> PathBuf {
    let exe = out_dir().join(name);
    let lib = lib_dir();
    let mut c = Command::new(cc());
    c.args(["-std=c11", opt, "-g", "-Wall", "-Wextra", "-Werror", "-I"]).arg(root().join("include")).arg(src);
    // The library under test accepts the old designs only with this feature.
    if cfg!(feature = "seed-variants") {
        c.arg("-DPAGEALLOC_SEED_VARIANTS");
    }
    match link {
        Link::Static => {
            c.arg(lib.join("libpagealloc_c.a")).args(NATIVE_LIBS);
        }
        Link::Shared => {
            c.arg("-L").arg(&lib).arg("-lpagealloc_c").arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lpthread");
        }
    }
    c.arg("-o").arg(&exe);
    check(&format!("compiling {}", src.display()), c.output().expect("run the C compiler"));
    exe
}

/// A program linked against the shared library, run so that it loads this
/// run's: cargo's LD_LIBRARY_PATH (which beats the rpath) may name another
/// directory holding an older copy first.
fn shared(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.env("LD_LIBRARY_PATH", lib_dir());
    c
}

fn api_test() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c")
}

#[test]
fn c_api_test_static() {
    let exe = build(&api_test(), "api_test_static", Link::Static);
    let out = check("api_test (static)", Command::new(&exe).output().expect("run api_test"));
    assert!(out.contains("all") && out.contains("checks passed"), "{out}");
    eprint!("{out}");
}

#[test]
fn c_api_test_shared() {
    let exe = build(&api_test(), "api_test_shared", Link::Shared);
    let out = check("api_test (shared)", shared(&exe).output().expect("run api_test"));
    assert!(out.contains("checks passed"), "{out}");
}

/// The C quick start in README.md: the first ```c block under
/// "## Quick start (C)", written out, built as the README says (static) and
/// run. It must exit 0, which it does only when the double free is refused.
#[test]
fn readme_c_quick_start() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let section = readme.split("## Quick start (C)").nth(1).expect("README has a \"## Quick start (C)\" section");
    let code = section
        .split("```c\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a ```c block in the C quick start");
    assert!(code.contains("int main"), "the C quick start must be a whole program:\n{code}");
    let src = out_dir().join("readme_quick_start.c");
    std::fs::write(&src, format!("{code}\n")).expect("write readme_quick_start.c");
    let exe = build(&src, "readme_quick_start", Link::Static);
    let out = check("README's C quick start", Command::new(&exe).output().expect("run readme_quick_start"));
    assert!(out.contains("refused: ") && out.contains("double free"), "{out}");
}

fn tcache_test() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/tcache_test.c")
}

/// Thread caches and the header-inline fast path: results, bad inputs, and a
/// race of owners, drains, stale frees and a foreign thread (1 s).
#[test]
fn c_tcache_test_static() {
    let exe = build(&tcache_test(), "tcache_test_static", Link::Static);
    let out = check("tcache_test (static)", Command::new(&exe).arg("1").output().expect("run tcache_test"));
    assert!(out.contains("checks passed") && out.contains("race: "), "{out}");
    eprint!("{out}");
}

/// Unoptimised, `pagealloc_inline.h` takes the library calls: the same
/// results.
#[test]
fn c_tcache_test_unoptimised() {
    let exe = build_opt(&tcache_test(), "tcache_test_o0", Link::Static, "-O0");
    let out = check("tcache_test (-O0)", Command::new(&exe).arg("0.3").output().expect("run tcache_test"));
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn c_tcache_test_shared() {
    let exe = build(&tcache_test(), "tcache_test_shared", Link::Shared);
    let out = check("tcache_test (shared)", shared(&exe).arg("1").output().expect("run tcache_test"));
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn c_example_page_fault1_runs() {
    let exe = build(&root().join("examples/c/page_fault1.c"), "page_fault1", Link::Static);
    for mode in ["call", "inline"] {
        let out = check("page_fault1", Command::new(&exe).args(["2", "0.2", mode]).output().expect("run page_fault1"));
        assert!(out.contains(&format!("(C API, {mode})")) && out.contains("iterations/s"), "{out}");
    }
}

#[test]
fn c_example_pair_cost_runs() {
    let exe = build(&root().join("examples/c/pair_cost.c"), "pair_cost", Link::Static);
    for mode in ["call", "inline"] {
        let out = check("pair_cost", Command::new(&exe).args(["10000", "2", mode]).output().expect("run pair_cost"));
        assert!(out.contains(&format!("C API pair ({mode}): best")), "{out}");
    }
}

#[test]
fn header_compiles_as_cpp() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let src = out_dir().join("header.cpp");
    std::fs::write(
        &src,
        "#include \"pagealloc_inline.h\"\nint main() { pagealloc_config c; uint64_t p = pagealloc_tc_alloc(nullptr, 0); \
         return pagealloc_config_default(&c) == PAGEALLOC_OK && pagealloc_tc_free_page(nullptr, p) != PAGEALLOC_OK ? 0 : 1; }\n",
    )
    .expect("write header.cpp");
    let Ok(o) = Command::new(&cxx)
        .args(["-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I"])
        .arg(root().join("include"))
        .arg(&src)
        .output()
    else {
        eprintln!("no C++ compiler ({cxx}): skipped");
        return;
    };
    check("compiling the header as C++", o);
}

/// The pkg-config template names this version and the static library's
/// native dependencies, and works: filled in for this build, its flags
/// compile and link a program against the shared library.
#[test]
fn pkg_config_file() {
    let tpl = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("pagealloc.pc.in")).expect("pc.in");
    assert!(tpl.contains(&format!("\nVersion: {}\n", env!("CARGO_PKG_VERSION"))), "Version differs from Cargo.toml");
    assert!(tpl.contains(&format!("\nLibs.private: {}\n", NATIVE_LIBS.join(" "))), "Libs.private differs");

    let dir = out_dir().join("pkgconfig");
    std::fs::create_dir_all(&dir).expect("pkgconfig dir");
    let pc = tpl
        .replace("@LIBDIR@", &lib_dir().display().to_string())
        .replace("@INCLUDEDIR@", &root().join("include").display().to_string());
    std::fs::write(dir.join("pagealloc.pc"), pc).expect("write pagealloc.pc");
    let Ok(o) =
        Command::new("pkg-config").env("PKG_CONFIG_PATH", &dir).args(["--cflags", "--libs", "pagealloc"]).output()
    else {
        eprintln!("no pkg-config: the template's fields were checked, the flags were not tried");
        return;
    };
    let flags = check("pkg-config", o);
    let exe = out_dir().join("pair_cost_pc");
    let mut c = Command::new(cc());
    c.args(["-std=c11", "-O1"]).arg(root().join("examples/c/pair_cost.c"));
    c.args(flags.split_whitespace());
    c.arg(format!("-Wl,-rpath,{}", lib_dir().display())).arg("-o").arg(&exe);
    check("compiling with pkg-config's flags", c.output().expect("run the C compiler"));
    check("pair_cost (pkg-config build)", shared(&exe).args(["1000", "1"]).output().expect("run"));
}
