// An embedded H2 workload for the fleet payload benchmark (bench/fleet/payload.py):
// an in-memory database with four tables (customers, products, orders,
// order_items) and T worker threads running a mix of inserts, indexed
// selects, joins with aggregates and updates for S seconds, each thread on
// its own connection, committing every 5 operations. Two workers can
// deadlock on row locks (order lines update products in random order): a
// 100 ms lock timeout rolls one back and it goes on, so the threads stay
// busy (a long timeout left them waiting most of the run). Prints one line
// "H2Work: ops=N ... rolled_back=R" at the end and exits with status 0, so
// the agent writes its last interval.
//
// Build: javac --release 17 -d classes H2Work.java   (no H2 classes needed to compile)
// Run:   java -cp classes:/usr/share/java/h2.jar H2Work [seconds=60] [threads=2]
//        (Debian: apt-get install --no-install-recommends libh2-java)

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicLong;

public final class H2Work {
    static final String URL = "jdbc:h2:mem:fleet;DB_CLOSE_DELAY=-1;LOCK_TIMEOUT=100";
    static final int CUSTOMERS = 20_000;
    static final int PRODUCTS = 5_000;
    static final AtomicLong OPS = new AtomicLong();
    static final AtomicLong ROWS = new AtomicLong();
    static final AtomicLong ORDER_IDS = new AtomicLong();
    static final AtomicLong ERRORS = new AtomicLong();

    public static void main(String[] args) throws Exception {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 60;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        try (Connection c = DriverManager.getConnection(URL, "sa", "")) {
            schema(c);
        }
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        Thread[] workers = new Thread[threads];
        Throwable[] failure = new Throwable[1];
        for (int i = 0; i < threads; i++) {
            final long seed = 0x9E3779B97F4A7C15L * (i + 1);
            workers[i] = new Thread(() -> {
                try {
                    work(seed, end);
                } catch (Throwable t) {
                    synchronized (failure) {
                        failure[0] = t;
                    }
                }
            }, "h2-worker-" + i);
            workers[i].start();
        }
        for (Thread t : workers) {
            t.join();
        }
        if (failure[0] != null) {
            failure[0].printStackTrace();
            System.exit(1);
        }
        long orders;
        try (Connection c = DriverManager.getConnection(URL, "sa", "");
             Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT COUNT(*) FROM orders")) {
            r.next();
            orders = r.getLong(1);
            s.execute("SHUTDOWN");
        }
        System.out.println("H2Work: ops=" + OPS.get() + " rows=" + ROWS.get() + " orders=" + orders
                + " rolled_back=" + ERRORS.get() + " seconds=" + seconds + " threads=" + threads);
    }

    static void schema(Connection c) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE customers(id INT PRIMARY KEY, name VARCHAR(64), city VARCHAR(32), balance DECIMAL(12,2))");
            s.execute("CREATE INDEX customers_city ON customers(city)");
            s.execute("CREATE TABLE products(id INT PRIMARY KEY, name VARCHAR(64), category INT, price DECIMAL(10,2), stock INT)");
            s.execute("CREATE INDEX products_category ON products(category)");
            s.execute("CREATE TABLE orders(id BIGINT PRIMARY KEY, customer_id INT, created TIMESTAMP, status VARCHAR(16))");
            s.execute("CREATE INDEX orders_customer ON orders(customer_id)");
            s.execute("CREATE TABLE order_items(order_id BIGINT, line INT, product_id INT, qty INT, price DECIMAL(10,2), "
                    + "PRIMARY KEY(order_id, line))");
            s.execute("CREATE INDEX items_product ON order_items(product_id)");
        }
        c.setAutoCommit(false);
        try (PreparedStatement p = c.prepareStatement("INSERT INTO customers VALUES (?, ?, ?, ?)")) {
            for (int i = 0; i < CUSTOMERS; i++) {
                p.setInt(1, i);
                p.setString(2, "customer-" + i);
                p.setString(3, "city-" + (i % 97));
                p.setBigDecimal(4, java.math.BigDecimal.valueOf(i % 1000, 0));
                p.addBatch();
                if (i % 1000 == 999) {
                    p.executeBatch();
                }
            }
            p.executeBatch();
        }
        try (PreparedStatement p = c.prepareStatement("INSERT INTO products VALUES (?, ?, ?, ?, ?)")) {
            for (int i = 0; i < PRODUCTS; i++) {
                p.setInt(1, i);
                p.setString(2, "product-" + i);
                p.setInt(3, i % 50);
                p.setBigDecimal(4, java.math.BigDecimal.valueOf(100 + i % 9000, 2));
                p.setInt(5, 1_000_000);
                p.addBatch();
            }
            p.executeBatch();
        }
        c.commit();
    }

    static void work(long seed, long end) throws SQLException {
        long x = seed;
        try (Connection c = DriverManager.getConnection(URL, "sa", "")) {
            c.setAutoCommit(false);
            PreparedStatement insOrder = c.prepareStatement("INSERT INTO orders VALUES (?, ?, CURRENT_TIMESTAMP, 'new')");
            PreparedStatement insItem = c.prepareStatement("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)");
            PreparedStatement byCustomer = c.prepareStatement(
                    "SELECT o.id, o.status, COUNT(i.line), SUM(i.qty * i.price) FROM orders o "
                    + "LEFT JOIN order_items i ON i.order_id = o.id WHERE o.customer_id = ? GROUP BY o.id, o.status");
            PreparedStatement byCity = c.prepareStatement(
                    "SELECT c.city, COUNT(DISTINCT o.id), SUM(i.qty) FROM customers c JOIN orders o ON o.customer_id = c.id "
                    + "JOIN order_items i ON i.order_id = o.id WHERE c.city = ? GROUP BY c.city");
            PreparedStatement topProducts = c.prepareStatement(
                    "SELECT p.id, p.name, SUM(i.qty) q FROM products p JOIN order_items i ON i.product_id = p.id "
                    + "WHERE p.category = ? GROUP BY p.id, p.name ORDER BY q DESC LIMIT 10");
            PreparedStatement stock = c.prepareStatement("UPDATE products SET stock = stock - ? WHERE id = ?");
            PreparedStatement status = c.prepareStatement("UPDATE orders SET status = ? WHERE id = ?");
            PreparedStatement balance = c.prepareStatement("UPDATE customers SET balance = balance + ? WHERE id = ?");
            while (System.nanoTime() < end) {
                try {
                    for (int round = 0; round < 5; round++) {
                        x = x * 6364136223846793005L + 1442695040888963407L;
                        int r = (int) ((x >>> 33) % 100);
                        int customer = (int) ((x >>> 17) % CUSTOMERS);
                        if (r < 35) {                      // a new order with 1-8 lines
                            long id = ORDER_IDS.incrementAndGet();
                            insOrder.setLong(1, id);
                            insOrder.setInt(2, customer);
                            insOrder.executeUpdate();
                            int lines = 1 + (int) ((x >>> 9) & 7);
                            for (int l = 0; l < lines; l++) {
                                x = x * 6364136223846793005L + 1442695040888963407L;
                                int product = (int) ((x >>> 20) % PRODUCTS);
                                int qty = 1 + (int) ((x >>> 5) & 3);
                                insItem.setLong(1, id);
                                insItem.setInt(2, l);
                                insItem.setInt(3, product);
                                insItem.setInt(4, qty);
                                insItem.setBigDecimal(5, java.math.BigDecimal.valueOf(100 + product % 9000, 2));
                                insItem.addBatch();
                                stock.setInt(1, qty);
                                stock.setInt(2, product);
                                stock.addBatch();
                            }
                            insItem.executeBatch();
                            stock.executeBatch();
                            ROWS.addAndGet(1 + 2L * lines);
                        } else if (r < 65) {               // indexed select + join on one customer
                            byCustomer.setInt(1, customer);
                            ROWS.addAndGet(drain(byCustomer));
                        } else if (r < 72) {               // three-table join by city
                            byCity.setString(1, "city-" + (customer % 97));
                            ROWS.addAndGet(drain(byCity));
                        } else if (r < 80) {               // join, aggregate, sort
                            topProducts.setInt(1, customer % 50);
                            ROWS.addAndGet(drain(topProducts));
                        } else if (r < 92) {               // update an order's status
                            long max = ORDER_IDS.get();
                            if (max > 0) {
                                status.setString(1, (x & 1) == 0 ? "paid" : "shipped");
                                status.setLong(2, 1 + (x >>> 11) % max);
                                ROWS.addAndGet(status.executeUpdate());
                            }
                        } else {                           // update a customer's balance
                            balance.setBigDecimal(1, java.math.BigDecimal.valueOf((x >>> 40) % 5000, 2));
                            balance.setInt(2, customer);
                            ROWS.addAndGet(balance.executeUpdate());
                        }
                        OPS.incrementAndGet();
                    }
                    c.commit();
                } catch (SQLException e) {     // a lock timeout (a deadlock between workers): retry
                    c.rollback();
                    if (ERRORS.incrementAndGet() > 100_000) {
                        throw e;
                    }
                }
            }
        }
    }

    static long drain(PreparedStatement p) throws SQLException {
        long n = 0;
        try (ResultSet r = p.executeQuery()) {
            while (r.next()) {
                n++;
                r.getObject(1);
            }
        }
        return n;
    }
}
