use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;
use Time::HiRes qw(time);

my $bus = start_bus(config => write_config(instances => 4), mode => 'tcp');
like($bus->{tcp}, qr/^127\.0\.0\.1:\d+$/, "listening on $bus->{tcp}");

# many concurrent clients, all reusing the same ids; each must get exactly its own responses
my $N = 100; my $M = 20;
my @c = map { $bus->connect } 1 .. $N;
for my $i (0 .. $N - 1) {
    $c[$i]->send(map { { jsonrpc => '2.0', id => $_, method => 'echo', params => { client => $i, n => $_ },
                         ($_ % 2 ? (sessionId => "c$i") : ()) } } 1 .. $M);
}
my $ok = 0; my $bad = 0;
for my $i (0 .. $N - 1) {
    my @m = $c[$i]->read_msgs($M, 10);
    my %seen;
    for my $m (@m) { if ($m->{result}{params}{client} == $i && $m->{result}{params}{n} == $m->{id}) { $seen{ $m->{id} }++ } else { $bad++ } }
    $ok++ if keys(%seen) == $M && @m == $M;
}
is($ok, $N, "all $N clients got their $M responses");
is($bad, 0, 'no cross-delivered responses');
# session affinity holds per client under load
my $aff = 0;
for my $i (0 .. 9) {
    $c[$i]->send(map { { id => "a$_", method => 'x', sessionId => "c$i" } } 1 .. 5);
    my %p = map { $_->{result}{pid} => 1 } $c[$i]->read_msgs(5);
    $aff++ if keys %p == 1;
}
is($aff, 10, 'session affinity under load');
$_->close for @c;
ok($bus->wait_log(qr/session\(s\) invalidated \(owning client disconnected\)/), 'sessions cleaned on disconnect');

# large message (just under the 1 MiB default) passes through both ways, unchanged
my $c = $bus->connect;
my $big = jenc({ id => 'big', method => 'echo', params => { blob => 'z' x 900_000, nested => [ [ [ { a => [1, 2, { b => 'c' }] } ] ] ] } });
my $t0 = time;
$c->send($big);
my $m = $c->read_msg(20);
is($m->{id}, 'big', 'large request/response');
is(length $m->{result}{params}{blob}, 900_000, 'payload intact');
cmp_ok(time - $t0, '<', 5, 'fast enough');
# deeply nested valid JSON is fine
$c->send('{"id":"deep","method":"ping","params":' . ('[' x 5000) . (']' x 5000) . '}');
is($c->read_msg(10)->{id}, 'deep', 'deep nesting accepted');
# unicode escapes in ids compare by value
$c->send('{"id":"\u00e9t\u00e9","method":"ping"}');
my $l = $c->read_line;
ok($l && JSON::PP->new->utf8->decode($l)->{id} eq "\x{e9}t\x{e9}", 'escaped string id matched (worker answers with raw UTF-8)');
is($bus->stop, 0, 'exit 0');
done_testing;
