//! A valid component of another world: it exports `answer`, not `evaluate`.

wit_bindgen::generate!({
    inline: "package other:thing@1.0.0; world other { export answer: func() -> u32; }",
    world: "other",
});

struct Other;

impl Guest for Other {
    fn answer() -> u32 {
        let table: Vec<Box<dyn Fn() -> u32>> = vec![Box::new(|| 42), Box::new(|| 7)];
        println!("answering");
        table[std::hint::black_box(0)]()
    }
}

export!(Other);
