// The guest's own egress rules (packaging/guest/egress.nft, loaded inside
// every VM) and the host filter (egress::blockedRanges4() and friends, in
// engine/network/egress.cpp) are two copies of one policy: the second
// layer must block what the first does, no less, so that either alone
// keeps a sandbox off the host and the private ranges. This reads the nft
// file as text and compares.
#include "network/egress.h"

#include <QFile>
#include <QHostAddress>
#include <QRegularExpression>
#include <QSet>
#include <QTest>

#include <algorithm>

using namespace sandcastle;

namespace {

/// A subnet in one spelling ("10.0.0.0/8"), or empty when `text` is none.
QString subnet(const QString &text) {
    const auto [address, prefix] = QHostAddress::parseSubnet(text.trimmed());
    if (address.isNull() || prefix < 0)
        return {};
    return address.toString() + QLatin1Char('/') + QString::number(prefix);
}

QStringList subnets(const QStringList &texts) {
    QStringList out;
    for (const QString &t : texts)
        out << subnet(t);
    std::sort(out.begin(), out.end());
    return out;
}

/// The elements of the anonymous set in the first rule of `rules` that
/// matches `pattern` (whose capture 1 is the inside of `{ ... }`).
QStringList setIn(const QString &rules, const QString &pattern) {
    const QRegularExpressionMatch m = QRegularExpression(pattern).match(rules);
    if (!m.hasMatch())
        return {};
    QStringList out;
    for (const QString &e : m.captured(1).split(QLatin1Char(','), Qt::SkipEmptyParts))
        out << e.trimmed();
    return out;
}

/// egress.nft without its comments.
QString guestRules() {
    QFile f(QStringLiteral(SOURCE_DIR "/packaging/guest/egress.nft"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    QString out;
    for (const QString &line : QString::fromUtf8(f.readAll()).split(QLatin1Char('\n')))
        out += line.section(QLatin1Char('#'), 0, 0) + QLatin1Char('\n');
    return out;
}

} // namespace

class TestGuestRules : public QObject {
    Q_OBJECT
private slots:
    void guestBlocksTheHostFiltersIpv4Ranges() {
        const QString rules = guestRules();
        QVERIFY2(!rules.trimmed().isEmpty(), "cannot read packaging/guest/egress.nft");
        const QStringList listed =
            setIn(rules, QStringLiteral(R"(\bip daddr \{([^}]*)\}\s*reject\b)"));
        QVERIFY2(!listed.isEmpty(), "egress.nft has no 'ip daddr { ... } reject' rule");
        const QStringList guest = subnets(listed);
        QVERIFY2(!guest.contains(QString()),
                 qPrintable(QStringLiteral("not a subnet in egress.nft: ") + listed.join(", ")));
        const QStringList host = subnets(egress::blockedRanges4());
        QVERIFY2(!host.contains(QString()), qPrintable(egress::blockedRanges4().join(", ")));
        // The same ranges, each once.
        QCOMPARE(QSet<QString>(guest.begin(), guest.end()).size(), guest.size());
        QCOMPARE(QSet<QString>(host.begin(), host.end()).size(), host.size());
        QCOMPARE(guest, host);
    }

    void guestBlocksTheHostFiltersTcpPorts() {
        const QStringList listed =
            setIn(guestRules(), QStringLiteral(R"(\btcp dport \{([^}]*)\}\s*reject\b)"));
        QVERIFY2(!listed.isEmpty(), "egress.nft has no 'tcp dport { ... } reject' rule");
        QList<int> guest;
        for (const QString &p : listed) {
            bool ok = false;
            guest << p.toInt(&ok);
            QVERIFY2(ok, qPrintable(p));
        }
        QList<int> host = egress::blockedTcpPorts();
        std::sort(guest.begin(), guest.end());
        std::sort(host.begin(), host.end());
        QCOMPARE(guest, host);
    }

    void guestBlocksAllOfIpv6() {
        // The host filter lists IPv6 ranges; the guest has no IPv6 way out
        // at all, which covers them.
        QVERIFY(!egress::blockedRanges6().isEmpty());
        QVERIFY2(QRegularExpression(QStringLiteral(R"(\bmeta nfproto ipv6 reject\b)"))
                     .match(guestRules())
                     .hasMatch(),
                 "egress.nft does not reject all IPv6");
    }
};

QTEST_GUILESS_MAIN(TestGuestRules)
#include "tst_guestrules.moc"
