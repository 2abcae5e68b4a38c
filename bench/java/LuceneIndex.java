/*
 * oxprof benchmark workload: index a real text corpus with Lucene 4.10 and query it.
 *
 * Usage: java -cp <lucene jars>:<classes> LuceneIndex [options] <corpus-dir>...
 *   --index DIR     on-disk index directory (default: RAM directory)
 *   --queries N     number of queries to run after indexing (default 400)
 *   --max-mb N      stop reading the corpus after N MB of text per pass (default: no limit)
 *   --passes N      index the corpus N times, as distinct documents (default 1)
 *
 * Indexes every *.java file below the corpus directories (sorted, so the work is
 * deterministic) with StandardAnalyzer, commits, then runs a deterministic mix of
 * term / boolean / phrase / prefix / fuzzy queries built from the index's own
 * frequent terms, via the classic QueryParser. Prints doc count and timings.
 * Exits non-zero on any error.
 */

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.LongField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.MultiFields;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.queryparser.classic.QueryParser;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.store.RAMDirectory;
import org.apache.lucene.util.BytesRef;
import org.apache.lucene.util.Version;

public class LuceneIndex {
    private static final Version V = Version.LUCENE_4_10_4;

    public static void main(String[] args) throws Exception {
        String indexDir = null;
        int numQueries = 400;
        long maxBytes = Long.MAX_VALUE;
        int passes = 1;
        List<Path> roots = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--index": indexDir = args[++i]; break;
                case "--queries": numQueries = Integer.parseInt(args[++i]); break;
                case "--max-mb": maxBytes = Long.parseLong(args[++i]) << 20; break;
                case "--passes": passes = Integer.parseInt(args[++i]); break;
                default: roots.add(Paths.get(args[i]));
            }
        }
        if (roots.isEmpty()) {
            System.err.println("usage: LuceneIndex [--index DIR] [--queries N] [--max-mb N] [--passes N] <corpus-dir>...");
            System.exit(2);
        }

        List<Path> files = new ArrayList<>();
        for (Path root : roots) {
            try (Stream<Path> s = Files.walk(root)) {
                files.addAll(s.filter(p -> p.toString().endsWith(".java") && Files.isRegularFile(p))
                              .sorted().collect(Collectors.toList()));
            }
        }
        if (files.isEmpty()) {
            System.err.println("LuceneIndex: no .java files found under " + roots);
            System.exit(1);
        }

        long t0 = System.nanoTime();
        Directory dir = indexDir == null ? new RAMDirectory() : FSDirectory.open(Paths.get(indexDir).toFile());
        Analyzer analyzer = new StandardAnalyzer(V);
        IndexWriterConfig cfg = new IndexWriterConfig(V, analyzer);
        cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
        cfg.setRAMBufferSizeMB(64);
        long bytes = 0;
        int docs = 0;
        try (IndexWriter w = new IndexWriter(dir, cfg)) {
            for (int pass = 0; pass < passes; pass++) {
                long passBytes = 0;
                for (Path p : files) {
                    if (passBytes >= maxBytes) break;
                    byte[] raw = Files.readAllBytes(p);
                    passBytes += raw.length;
                    Document d = new Document();
                    d.add(new StringField("path", pass + ":" + p, Field.Store.YES));
                    d.add(new LongField("size", raw.length, Field.Store.YES));
                    d.add(new TextField("contents", new String(raw, StandardCharsets.UTF_8), Field.Store.NO));
                    w.addDocument(d);
                    docs++;
                }
                bytes += passBytes;
            }
            w.forceMerge(1);
            w.commit();
        }
        long t1 = System.nanoTime();
        System.out.printf("indexed %d docs (%.1f MB of text) in %.2f s%n",
                docs, bytes / 1048576.0, (t1 - t0) / 1e9);

        long totalHits = 0;
        long checksum = 0;
        try (DirectoryReader reader = DirectoryReader.open(dir)) {
            IndexSearcher searcher = new IndexSearcher(reader);
            List<String> terms = topTerms(reader, "contents", 500);
            Random rnd = new Random(42);
            QueryParser qp = new QueryParser(V, "contents", analyzer);
            for (int i = 0; i < numQueries; i++) {
                String q = makeQuery(terms, rnd, i);
                Query query = qp.parse(q);
                TopDocs td = searcher.search(query, 20);
                totalHits += td.totalHits;
                for (ScoreDoc sd : td.scoreDocs) {
                    checksum += searcher.doc(sd.doc).get("path").length();
                }
            }
            long t2 = System.nanoTime();
            System.out.printf("ran %d queries (%d total hits, checksum %d) in %.2f s%n",
                    numQueries, totalHits, checksum, (t2 - t1) / 1e9);
            System.out.printf("LuceneIndex: docs=%d queries=%d total=%.2f s%n",
                    reader.numDocs(), numQueries, (t2 - t0) / 1e9);
        }
        dir.close();
    }

    /** The n terms with the highest document frequency (alphabetic, length >= 3). */
    static List<String> topTerms(DirectoryReader reader, String field, int n) throws IOException {
        Terms terms = MultiFields.getTerms(reader, field);
        PriorityQueue<Object[]> pq = new PriorityQueue<>((a, b) -> Integer.compare((Integer) a[1], (Integer) b[1]));
        TermsEnum te = terms.iterator(null);
        BytesRef br;
        while ((br = te.next()) != null) {
            String s = br.utf8ToString();
            if (s.length() < 3 || !s.chars().allMatch(Character::isLetter)) continue;
            pq.add(new Object[] {s, te.docFreq()});
            if (pq.size() > n) pq.poll();
        }
        List<String> out = new ArrayList<>();
        for (Object[] o : pq) out.add((String) o[0]);
        Collections.sort(out);
        return out;
    }

    static String makeQuery(List<String> t, Random r, int i) {
        String a = t.get(r.nextInt(t.size()));
        String b = t.get(r.nextInt(t.size()));
        String c = t.get(r.nextInt(t.size()));
        switch (i % 6) {
            case 0: return a;
            case 1: return "+" + a + " +" + b;
            case 2: return a + " " + b + " " + c;
            case 3: return "\"" + a + " " + b + "\"";
            case 4: return a.substring(0, 3) + "*";
            default: return a + "~1 AND " + b;
        }
    }
}
